package storage

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// validateWorker checks a worker identity. Unlike ValidateName it allows
// '#' (identity stamps are ADDR#START#RANDOM) and up to 256 bytes; it
// rejects empty, '{', '}', ',', whitespace and control characters.
func validateWorker(id string) error {
	if id == "" || len(id) > 256 {
		return fmt.Errorf("storage: worker identity %q: empty or longer than 256 bytes: %w", id, ErrInvalid)
	}
	if strings.ContainsAny(id, "{},") {
		return fmt.Errorf("storage: worker identity %q contains '{', '}' or ',': %w", id, ErrInvalid)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("storage: worker identity %q contains whitespace or a control character: %w", id, ErrInvalid)
		}
	}
	return nil
}

func ttlMS(op string, ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, invalid(op, "ttl %v is below 1ms", ttl)
	}
	return ttl.Milliseconds(), nil
}

// RegisterWorker registers identity with slots fixed slots and a heartbeat
// expiry of now+ttl. Registering again refreshes the expiry; a different
// slot count grows or shrinks the worker (shrinking past an assigned slot is
// ErrBadState). The worker has no placement profile: it takes runs of every
// group that requires nothing.
func (s *Store) RegisterWorker(ctx context.Context, identity string, slots int, ttl time.Duration) error {
	return s.RegisterWorkerWith(ctx, identity, slots, ttl, WorkerPlacement{})
}

// RegisterWorkerWith is RegisterWorker with a placement profile (it
// replaces the one registered before).
func (s *Store) RegisterWorkerWith(ctx context.Context, identity string, slots int, ttl time.Duration, p WorkerPlacement) error {
	const op = "register worker"
	if err := validateWorker(identity); err != nil {
		return err
	}
	if slots < 1 {
		return invalid(op, "worker %s: slots %d, want >= 1", identity, slots)
	}
	ms, err := ttlMS(op, ttl)
	if err != nil {
		return err
	}
	k := s.k
	prof, err := p.encode(op)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, op, "register_worker", []string{k.Workers(), k.Worker(identity), k.Slots(), k.Free(), k.Placement()},
		identity, slots, ms, k.WorkEvents(), prof)
	return err
}

// DrainWorker makes worker identity take no new runs (a graceful
// shutdown): its free slots leave the free zset and its slots freed later
// are not offered again. It returns how many of its slots are still
// assigned. ErrUnknownWorker if it is not registered.
func (s *Store) DrainWorker(ctx context.Context, identity string) (busy int, err error) {
	if err := validateWorker(identity); err != nil {
		return 0, err
	}
	k := s.k
	v, err := s.run(ctx, "drain worker", "drain_worker", []string{k.Draining(), k.Worker(identity), k.Slots(), k.Free()}, identity)
	return int(toInt64(v)), err
}

// DeregisterWorker removes worker identity and its slots, once none is
// assigned (ErrBadState otherwise); a worker not registered is a no-op.
func (s *Store) DeregisterWorker(ctx context.Context, identity string) error {
	if err := validateWorker(identity); err != nil {
		return err
	}
	k := s.k
	_, err := s.run(ctx, "deregister worker", "deregister_worker", []string{k.Draining(), k.Worker(identity), k.Slots(), k.Free(), k.Workers(),
		k.Placement()}, identity)
	return err
}

// SlotState is one slot of a worker. Run "" = free.
type SlotState struct {
	Index    int
	Run      string
	Token    string
	Task     int
	RunState State // state of Run ("" when free or the run is gone)
	// Detail is what a worker starts the run with (pickupFields: id,
	// group, state, assignments, payload, duration, attempt, max
	// attempts, timeout; the rest of the record is not read), read in the
	// same round trip as RunState, only for the task-0 slots the caller
	// asked for (Heartbeat's need, PollAssigned); nil otherwise.
	Detail *Run
}

func parseSlotValue(i int, v string) SlotState {
	st := SlotState{Index: i}
	if v == "" {
		return st
	}
	p := strings.Split(v, "#")
	if len(p) == 3 {
		st.Run, st.Token = p[0], p[1]
		st.Task, _ = strconv.Atoi(p[2])
	}
	return st
}

// fillRunStates reads the states of the slots' runs in one pipelined round
// trip; for a task-0 slot whose token satisfies need (nil: none) it reads
// what a worker starts it with instead (SlotState.Detail).
func (s *Store) fillRunStates(ctx context.Context, sl []SlotState, need func(token string) bool) error {
	idx := map[string][]int{}
	full := map[string]bool{}
	for i, x := range sl {
		if x.Run != "" {
			idx[x.Run] = append(idx[x.Run], i)
			if need != nil && x.Task == 0 && x.Token != "" && need(x.Token) {
				full[x.Run] = true
			}
		}
	}
	if len(idx) == 0 {
		return nil
	}
	cmds := make(map[string]*redis.StringCmd, len(idx))
	fulls := make(map[string]*redis.SliceCmd, len(full))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for r := range idx {
			if full[r] {
				fulls[r] = p.HMGet(ctx, s.k.Run(r), pickupFields...)
			} else {
				cmds[r] = p.HGet(ctx, s.k.Run(r), "state")
			}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return err
	}
	for r, c := range cmds {
		for _, i := range idx[r] {
			sl[i].RunState = State(c.Val())
		}
	}
	for r, c := range fulls {
		run, ok := parsePickup(c.Val())
		for _, i := range idx[r] {
			if ok {
				sl[i].RunState = run.State
				if sl[i].Task == 0 {
					d := run
					sl[i].Detail = &d
				}
			}
		}
	}
	return nil
}

// Heartbeat extends the worker's expiry to now+ttl and returns its slots
// with the state of each assigned run (one script + one pipelined read).
// ErrUnknownWorker when the worker was reaped or never registered. need
// (nil: none) selects task-0 slots, by token, whose pickup fields
// (SlotState.Detail) are read in the same pipelined read: a worker passes
// "tokens I have not started yet", so starting a run costs no extra round
// trip.
func (s *Store) Heartbeat(ctx context.Context, identity string, ttl time.Duration, need func(token string) bool) ([]SlotState, error) {
	const op = "heartbeat"
	if err := validateWorker(identity); err != nil {
		return nil, err
	}
	ms, err := ttlMS(op, ttl)
	if err != nil {
		return nil, err
	}
	k := s.k
	// The slots it returns may be started: durable (WAIT), bounded by a
	// third of the TTL so a missing replica cannot make it miss its beat.
	ctx = waitBounded(ctx, ttl/3)
	v, err := s.run(ctx, op, "heartbeat", []string{k.Workers(), k.Worker(identity), k.Slots()}, identity, ms, 1, s.forceWrite(ctx))
	if err != nil {
		return nil, err
	}
	vals := v.([]any)
	out := make([]SlotState, len(vals))
	for i, x := range vals {
		out[i] = parseSlotValue(i, str(x))
	}
	if err := s.fillRunStates(ctx, out, need); err != nil {
		return nil, fmt.Errorf("storage: %s: run states: %w", op, err)
	}
	return out, nil
}

// Beat extends the worker's expiry to now+ttl: Heartbeat without reading
// the slots (one script of two commands), liveness only: it never waits
// for a replica. ErrUnknownWorker when the worker was reaped or never
// registered.
func (s *Store) Beat(ctx context.Context, identity string, ttl time.Duration) error {
	return s.beat(waitBounded(ctx, 0), identity, ttl)
}

// ConfirmBeat is Beat acknowledged by a replica when the store waits for
// replicas (bounded by a third of ttl; ErrNotReplicated if none did): a
// write of the worker's own, sent after it read assignments, whose WAIT
// covers them (the replication stream is ordered). A durable worker starts
// what it read only after it. Without durability it is Beat.
func (s *Store) ConfirmBeat(ctx context.Context, identity string, ttl time.Duration) error {
	return s.beat(waitBounded(ctx, ttl/3), identity, ttl)
}

// beat is the heartbeat script without the slots; ctx's wait bound says
// whether (and how long) it waits for a replica.
func (s *Store) beat(ctx context.Context, identity string, ttl time.Duration) error {
	const op = "heartbeat"
	if err := validateWorker(identity); err != nil {
		return err
	}
	ms, err := ttlMS(op, ttl)
	if err != nil {
		return err
	}
	k := s.k
	_, err = s.run(ctx, op, "heartbeat", []string{k.Workers(), k.Worker(identity), k.Slots()}, identity, ms, 0, s.forceWrite(ctx))
	return err
}

// SlotEvent is one task-0 assignment (or stop request) announced on the
// worker's keyspace.Keys.SlotEvents(identity) by apply, AllocateBatch or
// RequestStop: worker identity, slot index, run id.
type SlotEvent struct {
	Worker string
	Slot   int
	Run    string
}

// ParseSlotEvents parses a SlotEvents message: space-separated
// "worker#index#run" entries (worker identities may contain '#'; index and
// run never do). Malformed entries are skipped.
func ParseSlotEvents(payload string) []SlotEvent {
	var out []SlotEvent
	for _, e := range strings.Fields(payload) {
		j := strings.LastIndexByte(e, '#')
		if j <= 0 {
			continue
		}
		i := strings.LastIndexByte(e[:j], '#')
		if i <= 0 {
			continue
		}
		idx, err := strconv.Atoi(e[i+1 : j])
		if err != nil || idx < 0 || j+1 == len(e) {
			continue
		}
		out = append(out, SlotEvent{Worker: e[:i], Slot: idx, Run: e[j+1:]})
	}
	return out
}

// pickupFields are the run fields a worker starts a run with (the
// worker's Run: id, group, payload, attempt, max attempts, timeout,
// duration, trace context; the state and assignments that say the slot
// is still the run's): a pickup reads these, not the whole record (runFields; 37
// fields, most of them empty on a run just placed).
var pickupFields = []string{"id", "group", "state", "assign", "payload", "duration_ms", "attempt", "max_attempts", "timeout_ms", "tp"}

// parsePickup reads HMGET values of pickupFields (ok false: no run).
func parsePickup(vals []any) (Run, bool) {
	if len(vals) < len(pickupFields) || vals[0] == nil {
		return Run{}, false
	}
	return Run{ID: str(vals[0]), Group: str(vals[1]), State: State(str(vals[2])), Assignments: parseAssign(str(vals[3])),
		Payload: str(vals[4]), Duration: time.Duration(toInt64(vals[5])) * time.Millisecond,
		Attempt: max(int(toInt64(vals[6])), 1), MaxAttempts: max(int(toInt64(vals[7])), 1),
		Timeout: time.Duration(toInt64(vals[8])) * time.Millisecond, TraceParent: str(vals[9])}, true
}

// PollAssigned is the read-only pickup of announced assignments: for each
// event of worker identity it reads what the worker starts the announced
// run with (pickupFields), all in ONE pipelined round trip (one HMGET per
// run). It returns the slots whose run
// still records task 0 on that slot of identity (the run's assignments and
// the slot table change together, in the same scripts), with RunState and
// Detail set (other events are dropped: the heartbeat reconciles them).
func (s *Store) PollAssigned(ctx context.Context, identity string, evs []SlotEvent) ([]SlotState, error) {
	const op = "poll assigned"
	if err := validateWorker(identity); err != nil {
		return nil, err
	}
	keep := make([]SlotEvent, 0, len(evs))
	for _, e := range evs {
		if e.Worker == identity && limits.ValidateName("run", e.Run) == nil {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 {
		return nil, nil
	}
	cs := make([]*redis.SliceCmd, 0, len(keep))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range keep {
			cs = append(cs, p.HMGet(ctx, s.k.Run(e.Run), pickupFields...))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("storage: %s: %w", op, err)
	}
	out := make([]SlotState, 0, len(keep))
	for i, e := range keep {
		r, ok := parsePickup(cs[i].Val())
		if !ok {
			continue
		}
		for _, a := range r.Assignments {
			if a.Task == 0 && a.Worker == identity && a.Slot == e.Slot && a.Token != "" {
				d := r
				out = append(out, SlotState{Index: e.Slot, Run: r.ID, Token: a.Token, Task: 0, RunState: r.State, Detail: &d})
				break
			}
		}
	}
	return out, nil
}

// Report records the outcome (SUCCEEDED, FAILED or STOPPED) of a run; a run
// whose stop was requested (STOPPING) always ends STOPPED, a SUCCEEDED or
// FAILED outcome then kept in its reason. Only
// the worker holding task 0 with its token may report (else ErrNotOwner and
// nothing is written). It releases every slot of the run that still holds
// run#token#task, bumps the group version and marks it dirty. A retried
// report (same token) succeeds without writing.
func (s *Store) Report(ctx context.Context, identity, runID, token string, outcome State, reason string) error {
	const op = "report"
	if err := validateWorker(identity); err != nil {
		return err
	}
	switch outcome {
	case StateSucceeded, StateFailed, StateStopped:
	default:
		return invalid(op, "run %s: outcome %q, want SUCCEEDED, FAILED or STOPPED", runID, outcome)
	}
	if token == "" {
		return invalid(op, "run %s: empty token", runID)
	}
	g, err := s.runGroup(ctx, op, runID)
	if err != nil {
		return err
	}
	return s.report(ctx, identity, g, runID, token, outcome, reason)
}

// ReportReq is one report of a ReportBatch.
type ReportReq struct {
	Group, Run, Token string
	Outcome           State
	Reason            string
	// What the attempt produced, stored on the run (each optional): a
	// handler's result (at most MaxResult bytes), the tail of a program's
	// output (at most MaxOutput), its exit code.
	Result, Output string
	ExitCode       *int
}

// Bounds of what a report stores on a run.
const ()

func reportCheck(identity string, r ReportReq) error {
	const op = "report"
	if err := validateWorker(identity); err != nil {
		return err
	}
	if err := limits.ValidateName("group", r.Group); err != nil {
		return fmt.Errorf("storage: %s: %w", op, err)
	}
	if err := limits.ValidateName("run", r.Run); err != nil {
		return fmt.Errorf("storage: %s: %w", op, err)
	}
	switch r.Outcome {
	case StateSucceeded, StateFailed, StateStopped:
	default:
		return invalid(op, "run %s: outcome %q, want SUCCEEDED, FAILED or STOPPED", r.Run, r.Outcome)
	}
	if r.Token == "" {
		return invalid(op, "run %s: empty token", r.Run)
	}
	if len(r.Result) > limits.MaxResult {
		return invalid(op, "run %s: result is %d bytes, at most %d", r.Run, len(r.Result), limits.MaxResult)
	}
	if len(r.Output) > limits.MaxOutput {
		return invalid(op, "run %s: output is %d bytes, at most %d (keep its tail)", r.Run, len(r.Output), limits.MaxOutput)
	}
	return nil
}

// ReportBatch is Report for many runs of worker identity whose groups the
// caller knows (a worker has them from the run records): the reports go
// in report calls of up to reportsPerCall (one script call carries many:
// its clock, draining checks and shared writes once, report.lua), all
// sent in ONE pipelined round trip; each report keeps Report's checks and
// replay rule. Errors are per run, in order (ErrNotOwner, ErrNotFound,
// ErrBadState, ErrInvalid...): one refused report does not affect the
// others.
func (s *Store) ReportBatch(ctx context.Context, identity string, reps []ReportReq) []error {
	errs := make([]error, len(reps))
	parts := make([]scriptCall, 0, len(reps))
	pos := make([]int, 0, len(reps))
	for i, r := range reps {
		if err := reportCheck(identity, r); err != nil {
			errs[i] = err
			continue
		}
		parts = append(parts, s.reportPart(r))
		pos = append(pos, i)
	}
	calls, n := packCalls(func() scriptCall { return s.reportHead(identity) }, parts, reportsPerCall, nil, 0)
	vals, perrs := s.runPipe(ctx, "report", "report", calls)
	_, perrs = callResults("report", n, vals, perrs)
	for j, i := range pos {
		errs[i] = perrs[j]
	}
	return errs
}

// reportsPerCall is how many reports one report call carries at most (a
// worker's pipeline of reports goes as calls of this many).
const reportsPerCall = 32

// reportHead is a report call's shared keys and args (report.lua).
func (s *Store) reportHead(identity string) scriptCall {
	k := s.k
	return scriptCall{
		keys: []string{k.Slots(), k.Free(), k.Retire(), k.Restore(), k.Dirty(), k.Timers(), k.PolicyGen()},
		args: []any{identity, k.WorkEvents(), k.RunEvents(), limits.DefaultWindow},
	}
}

// reportPart is one report's keys and args in a report call.
func (s *Store) reportPart(r ReportReq) scriptCall {
	if len(r.Reason) > maxStopReason {
		// a handler's error can be anything: the run (and each of its
		// recorded attempts) keeps its first maxStopReason bytes
		r.Reason = r.Reason[:maxStopReason] + "..."
	}
	k := s.k
	g := r.Group
	code := ""
	if r.ExitCode != nil {
		code = strconv.Itoa(*r.ExitCode)
	}
	return scriptCall{
		keys: []string{k.Run(r.Run), k.Group(g), k.Active(g), k.Finished(g), k.Waiting(g), k.WaitInfo(g), k.Delayed(g)},
		args: []any{r.Run, r.Token, string(r.Outcome), r.Reason, g, r.Result, r.Output, code},
	}
}

func (s *Store) report(ctx context.Context, identity, g, runID, token string, outcome State, reason string) error {
	return s.ReportBatch(ctx, identity, []ReportReq{{Group: g, Run: runID, Token: token, Outcome: outcome, Reason: reason}})[0]
}

// LaunchedRuns returns up to limit (<= 0: all) LAUNCHED runs waiting for
// slots, FIFO by seq.
func (s *Store) LaunchedRuns(ctx context.Context, limit int) ([]string, error) {
	ids, err := s.c.ZRange(ctx, s.k.Launched(), 0, int64(limit)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: launched runs: %w", err)
	}
	return ids, nil
}

// AllocOutcome is the result of one run of an AllocateBatch.
type AllocOutcome string

// allocateBatch outcomes.
const (
	AllocAllocated AllocOutcome = "allocated" // all k slots assigned, run RUNNING
	AllocSkipped   AllocOutcome = "skipped"   // not LAUNCHED (stopped or gone): nothing written
	AllocNoSlots   AllocOutcome = "no_slots"  // fewer than k free slots: nothing written, batch stopped
)

// AllocResult is one run of an AllocateBatch, in the order given.
type AllocResult struct {
	Run         string
	Outcome     AllocOutcome
	State       State        // AllocSkipped: the run's state ("" if gone)
	Needed      int          // AllocNoSlots: slots the run needs
	Found       int          // AllocNoSlots: free slots on live workers
	Held        bool         // AllocNoSlots: it waited past the guard; the batch stopped at it
	Group       string       // AllocNoSlots: the run's group
	Require     []abi.Label  // AllocNoSlots: its requirements (placement; none: any worker that serves the group)
	SameWorker  bool         // AllocNoSlots: its slots must all be on one worker
	Assignments []Assignment // AllocAllocated, by task
}

// allocateBatch is Allocate for up to len(runIDs) runs in ONE fenced script:
// in the given order (pass the head of LaunchedRuns: FIFO by seq), each
// LAUNCHED run gets all of its k slots or none; a run that is no longer
// LAUNCHED is skipped; the first run that does not fit stops the batch
// (AllocNoSlots, nothing written for it), so no younger run overtakes it.
// The results are in order and end at the first AllocNoSlots; runs after it
// are not in the results. The workers that got a task-0 slot are notified,
// each on its own keyspace.Keys.SlotEvents(identity). A go-redis retry finds the runs it already
// allocated (same op id) and reports them allocated again, never twice.
// Errors (nothing written): ErrFenced, ErrInvalid (a run id twice or invalid).
func (s *Store) allocateBatch(ctx context.Context, f Fence, runIDs []string) ([]AllocResult, error) {
	return s.allocateBackfill(ctx, f, runIDs, 0)
}

// allocateBackfill is AllocateBatch with backfill: a run that does not fit
// is passed over (AllocNoSlots, Held false) and the younger runs that fit
// get slots, unless it has been LAUNCHED for at least guard: then it is
// held (Held true), the batch stops at it, and the slots freed from then
// on wait for it (no younger run overtakes it). guard 0 holds every misfit:
// AllocateBatch's strict FIFO.
// A misfit that found no free slot (Found 0) ends the batch too: nothing
// younger could fit.
func (s *Store) allocateBackfill(ctx context.Context, f Fence, runIDs []string, guard time.Duration) ([]AllocResult, error) {
	return s.AllocatePass(ctx, f, runIDs, max(len(runIDs), 1), guard, nil) // one call
}

// AllocChunk is the most runs one allocate script of an AllocatePass
// places: it bounds the time Redis spends in one script (128 took up to
// 5.8 ms on the 100,000 delayed-runs bench, 64 keeps it near 3;
// BENCHMARKS.md "Runs in time").
const AllocChunk = 64

// AllocatePass is AllocateBackfill for a whole slot manager pass: runIDs
// in calls of at most perCall runs (<= 0: AllocChunk), all sent in ONE
// pipelined round trip instead of one after another. The results are
// those the calls would give one after another: a call that stops (a held
// run, or a misfit that found no free slot) marks the pass
// (Keys.AllocStop), and the calls after it place nothing, so the results
// end where the first stopping call ended. Each call is its own fenced
// script with its own op id (a go-redis retry of one call replays only
// it). On an error the results of the calls before the failed one are
// returned with it. place (placement: may be nil) names, for some runs,
// the free slots ("worker#index", AllocationView.FreeSlots) they take:
// a run takes the first of them still free on a live worker it may use,
// and when too few are, the first free slots it may use anywhere (the
// slots were free when the view was read, not necessarily now). Errors:
// ErrFenced, ErrInvalid (a run id twice in one call, an invalid id, a
// negative guard).
func (s *Store) AllocatePass(ctx context.Context, f Fence, runIDs []string, perCall int, guard time.Duration, place map[string][]string) ([]AllocResult, error) {
	const op = "allocate batch"
	if guard < 0 {
		return nil, invalid(op, "negative guard %v", guard)
	}
	if perCall <= 0 {
		perCall = AllocChunk
	}
	for _, id := range runIDs {
		if err := limits.ValidateName("run", id); err != nil {
			return nil, fmt.Errorf("storage: %s: %w", op, err)
		}
	}
	k := s.k
	pass := "" // one call alone needs no stop mark
	if len(runIDs) > perCall {
		pass = newID("pass-")
	}
	var calls []scriptCall
	for lo := 0; lo < len(runIDs); lo += perCall {
		chunk := runIDs[lo:min(lo+perCall, len(runIDs))]
		keys := make([]string, 0, 9+len(chunk))
		keys = append(keys, k.Fence(), k.Lock(), k.Workers(), k.Slots(), k.Free(), k.Launched(), k.Tokens(), k.LaunchInfo(), k.AllocStop())
		args := make([]any, 0, 7+len(chunk))
		args = append(args, f.args()...)
		args = append(args, newID("op-"), k.SlotEventsPrefix(), k.RunEvents(), guard.Milliseconds(), pass)
		for _, id := range chunk {
			keys = append(keys, k.Run(id))
			if sl := place[id]; len(sl) > 0 {
				args = append(args, id+"\x1e"+strings.Join(sl, "\x1d"))
			} else {
				args = append(args, id)
			}
		}
		calls = append(calls, scriptCall{keys: keys, args: args})
	}
	vals, errs := s.runPipe(ctx, op, "allocate_batch", calls)
	var out []AllocResult
	for i, v := range vals {
		if errs[i] != nil {
			return out, errs[i]
		}
		out = appendAllocResults(out, v)
	}
	return out, nil
}

// appendAllocResults appends the rows of one allocate_batch reply.
func appendAllocResults(out []AllocResult, v any) []AllocResult {
	rows, _ := v.([]any)
	for _, x := range rows {
		row, _ := x.([]any)
		if len(row) < 3 {
			continue
		}
		r := AllocResult{Run: str(row[0]), Outcome: AllocOutcome(str(row[1]))}
		switch r.Outcome {
		case AllocAllocated:
			r.Assignments = flatAssign(row[2])
		case AllocSkipped:
			r.State = State(str(row[2]))
		case AllocNoSlots:
			r.Needed = int(toInt64(row[2]))
			if len(row) > 3 {
				r.Found = int(toInt64(row[3]))
			}
			r.Held = len(row) > 4 && toInt64(row[4]) == 1
			if len(row) > 6 {
				r.Group = str(row[5])
				r.Require, r.SameWorker, _ = splitReq(decodeLabels(str(row[6])))
			}
		}
		out = append(out, r)
	}
	return out
}

// WorkerView is one worker in a SlotsView.
type WorkerView struct {
	Identity string
	Alive    bool      // heartbeat expiry in the future (Redis time)
	Draining bool      // it takes no new run (drain_worker: a graceful shutdown)
	Expires  time.Time // heartbeat expiry
	Slots    []SlotState
	// Placement is what it registered for placement (RegisterWorkerWith).
	Placement WorkerPlacement
}

// SlotsView is the slot table of the namespace.
type SlotsView struct {
	Workers []WorkerView // by identity
	// Free and Assigned count the slots of live workers; Free only those a
	// run may be placed on: a draining worker's free slots are Draining.
	Free, Assigned, Draining int
}

// Slots reads every worker and slot (one pipelined round trip + run states).
func (s *Store) Slots(ctx context.Context) (SlotsView, error) {
	var (
		ws    *redis.ZSliceCmd
		sl    *redis.MapStringStringCmd
		tnow  *redis.TimeCmd
		dr    *redis.StringSliceCmd
		pl    *redis.MapStringStringCmd
		view  SlotsView
		byW   = map[string]*WorkerView{}
		slots []SlotState
		owner []*WorkerView
	)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		ws = p.ZRangeWithScores(ctx, s.k.Workers(), 0, -1)
		sl = p.HGetAll(ctx, s.k.Slots())
		tnow = p.Time(ctx)
		dr = p.SMembers(ctx, s.k.Draining())
		pl = p.HGetAll(ctx, s.k.Placement())
		return nil
	})
	if err != nil {
		return view, fmt.Errorf("storage: slots: %w", err)
	}
	now := tnow.Val()
	draining := map[string]bool{}
	for _, w := range dr.Val() {
		draining[w] = true
	}
	for _, z := range ws.Val() {
		id := z.Member.(string)
		exp := time.UnixMilli(int64(z.Score))
		view.Workers = append(view.Workers, WorkerView{Identity: id, Alive: exp.After(now), Draining: draining[id], Expires: exp,
			Placement: decodePlacement(pl.Val()[id])})
	}
	sort.Slice(view.Workers, func(i, j int) bool { return view.Workers[i].Identity < view.Workers[j].Identity })
	for i := range view.Workers {
		byW[view.Workers[i].Identity] = &view.Workers[i]
	}
	for field, v := range sl.Val() {
		j := strings.LastIndexByte(field, '#')
		if j < 0 {
			continue
		}
		w := byW[field[:j]]
		if w == nil {
			continue
		}
		idx, _ := strconv.Atoi(field[j+1:])
		slots = append(slots, parseSlotValue(idx, v))
		owner = append(owner, w)
	}
	if err := s.fillRunStates(ctx, slots, nil); err != nil {
		return view, fmt.Errorf("storage: slots: run states: %w", err)
	}
	for i, st := range slots {
		w := owner[i]
		w.Slots = append(w.Slots, st)
		switch {
		case !w.Alive:
		case st.Run != "":
			view.Assigned++
		case w.Draining:
			view.Draining++
		default:
			view.Free++
		}
	}
	for i := range view.Workers {
		w := &view.Workers[i]
		sort.Slice(w.Slots, func(a, b int) bool { return w.Slots[a].Index < w.Slots[b].Index })
	}
	return view, nil
}

// Reaped is what ReapDeadWorkers did.
type Reaped struct {
	Workers  []string // the reaped identities
	Affected []string // the runs that held one of their slots (now in the restore set)
	Assigned int      // slots assigned to runs, namespace-wide, before the reap
}

// SpareWorkersSince makes ReapDeadWorkers spare every heartbeat-expired
// worker until its heartbeat TTL has passed since t, as after a maxmemory
// refusal, and RestoreCheck and RestoreApply take it for alive meanwhile
// (the restore keeps its runs on it). A new leader calls it when its term starts: it cannot know
// whether workers could reach Redis before it led, and after a Redis
// failover every worker's heartbeats failed for the whole outage (issue
// 29: reaping them at once relaunched runs they had finished).
func (s *Store) SpareWorkersSince(t time.Time) {
	for {
		old := s.refused.Load()
		if t.UnixNano() <= old || s.refused.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// sparedSince is the ms since SpareWorkersSince's time or Redis's last
// maxmemory refusal of this Store's writes, -1 for never: the scripts that
// judge a worker's liveness (reap, restore_check, restore_apply) take a
// worker whose heartbeat expired for alive while less than its heartbeat
// TTL has passed since.
func (s *Store) sparedSince() int64 {
	if at := s.refused.Load(); at != 0 {
		return time.Since(time.Unix(0, at)).Milliseconds()
	}
	return -1
}

// ReapDeadWorkers removes heartbeat-expired workers and all their slots and
// records the runs that held one of them in the restore set. Fenced. A
// worker whose heartbeat expired is spared while less than its heartbeat
// TTL has passed since Redis last refused one of this Store's writes at
// maxmemory: its heartbeats were refused too, and it gets a full TTL to
// send one.
func (s *Store) ReapDeadWorkers(ctx context.Context, f Fence) (Reaped, error) {
	const op = "reap"
	k := s.k
	v, err := s.run(ctx, op, "expired_workers", []string{k.Workers(), k.Slots(), k.Free()}, 100)
	if err != nil {
		return Reaped{}, err
	}
	a, _ := v.([]any)
	for len(a) < 2 {
		a = append(a, nil)
	}
	cands, out := toStrings(a[0]), Reaped{Assigned: int(toInt64(a[1]))}
	if len(cands) == 0 {
		// still check the fence so a deposed leader learns it
		return out, s.checkFence(ctx, f)
	}
	keys := []string{k.Fence(), k.Lock(), k.Workers(), k.Slots(), k.Free(), k.Restore()}
	args := append(f.args(), s.sparedSince())
	for _, w := range cands {
		keys = append(keys, k.Worker(w))
		args = append(args, w)
	}
	v, err = s.run(ctx, op, "reap", keys, args...)
	if err != nil {
		return out, err
	}
	r := v.([]any)
	out.Workers, out.Affected = toStrings(r[0]), toStrings(r[1])
	return out, nil
}

func toStrings(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		out = append(out, str(x))
	}
	return out
}

// ActiveRunIDs returns every LAUNCHED/RUNNING/STOPPING run id, by seq
// (what a new leader restores).
func (s *Store) ActiveRunIDs(ctx context.Context) ([]string, error) {
	groups, err := s.c.SMembers(ctx, s.k.Groups()).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: active runs: %w", err)
	}
	cmds := make([]*redis.ZSliceCmd, len(groups))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, g := range groups {
			cmds[i] = p.ZRangeWithScores(ctx, s.k.Active(g), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: active runs: %w", err)
	}
	var all []redis.Z
	for _, c := range cmds {
		all = append(all, c.Val()...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Score < all[j].Score })
	out := make([]string, len(all))
	for i, z := range all {
		out[i] = z.Member.(string)
	}
	return out, nil
}

// RestoreQueue returns up to limit (<= 0: all) members of the restore set, sorted.
func (s *Store) RestoreQueue(ctx context.Context, limit int) ([]string, error) {
	ids, err := s.c.SMembers(ctx, s.k.Restore()).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: restore queue: %w", err)
	}
	sort.Strings(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, nil
}

// CheckedSlot is a recorded slot of a run with its verification.
type CheckedSlot struct {
	Assignment
	// Alive: the worker is registered and its heartbeat has not expired,
	// or expired less than its heartbeat TTL after SpareWorkersSince (a
	// new leader's term: the worker's beats may have died with a failed
	// master; it gets the grace the reaper gives it)
	Alive bool
	Held  bool // the slot still holds run#token#task
}

// RestoreCheck is the input of a slot-reuse decision.
type RestoreCheck struct {
	Run   Run
	Slots []CheckedSlot // by task
}

// RestoreCheck verifies, inside one script, each recorded slot of runID.
func (s *Store) RestoreCheck(ctx context.Context, runID string) (RestoreCheck, error) {
	const op = "restore check"
	if err := limits.ValidateName("run", runID); err != nil {
		return RestoreCheck{}, err
	}
	k := s.k
	args := append([]any{runID, s.sparedSince(), k.Worker("")}, runFieldArgs()...)
	v, err := s.run(ctx, op, "restore_check", []string{k.Run(runID), k.Workers(), k.Slots()}, args...)
	if err != nil {
		return RestoreCheck{}, err
	}
	a := v.([]any)
	r, _ := parseRun(a[0].([]any))
	rc := RestoreCheck{Run: r}
	sl := a[1].([]any)
	for i := 0; i+5 < len(sl); i += 6 {
		idx, _ := strconv.Atoi(str(sl[i+1]))
		task, _ := strconv.Atoi(str(sl[i+3]))
		rc.Slots = append(rc.Slots, CheckedSlot{
			Assignment: Assignment{Worker: str(sl[i]), Slot: idx, Token: str(sl[i+2]), Task: task},
			Alive:      toInt64(sl[i+4]) == 1, Held: toInt64(sl[i+5]) == 1,
		})
	}
	sort.Slice(rc.Slots, func(i, j int) bool { return rc.Slots[i].Task < rc.Slots[j].Task })
	return rc, nil
}

// RestoreApply applies a slot-reuse decision for a RUNNING/STOPPING run:
// reuseTasks keep their slot (re-verified in the script: worker alive or
// spared, as CheckedSlot.Alive, and slot still holding run#token#task,
// else ErrStale), reallocTasks get new
// slots all-or-nothing (ErrNoSlots: nothing written, retained slots stay).
// The two lists must partition 0..k-1 (ErrInvalid). The old slot of a
// reallocated task is released only if it still holds run#token#task. On
// success the run leaves the restore set. Fenced. Returns all assignments.
func (s *Store) RestoreApply(ctx context.Context, f Fence, runID string, reuseTasks, reallocTasks []int) ([]Assignment, error) {
	const op = "restore apply"
	if err := limits.ValidateName("run", runID); err != nil {
		return nil, err
	}
	k := s.k
	args := append(f.args(), runID, newID("op-"), s.sparedSince(), k.Worker(""), len(reuseTasks))
	for _, t := range reuseTasks {
		args = append(args, t)
	}
	for _, t := range reallocTasks {
		args = append(args, t)
	}
	v, err := s.run(ctx, op, "restore_apply",
		[]string{k.Fence(), k.Lock(), k.Run(runID), k.Workers(), k.Slots(), k.Free(), k.Restore(), k.Tokens()}, args...)
	if err != nil {
		return nil, err
	}
	return flatAssign(v), nil
}

// FailRun makes an active run FAILED (reason recorded), releases the slots
// it still holds and removes it from active/launched/restore. Fenced. An
// already FAILED run is a no-op; WAITING or other final states ErrBadState.
// A RUNNING run with attempts left goes back to WAITING for its retry
// instead (as a FAILED report).
func (s *Store) FailRun(ctx context.Context, f Fence, runID, reason string) error {
	const op = "fail run"
	g, err := s.runGroup(ctx, op, runID)
	if err != nil {
		return err
	}
	k := s.k
	args := append(f.args(), runID, reason, g, k.RunEvents(), k.WorkEvents())
	_, err = s.run(ctx, op, "fail_run",
		[]string{k.Fence(), k.Lock(), k.Run(runID), k.Group(g), k.Active(g), k.Launched(), k.Restore(), k.Slots(), k.Free(), k.Dirty(), k.Finished(g), k.Retire(),
			k.Delayed(g), k.Timers(), k.LaunchInfo()}, args...)
	return err
}
