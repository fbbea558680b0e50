package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// State is a run state.
type State string

// Run states. WAITING -> LAUNCHED -> RUNNING -> SUCCEEDED|FAILED|STOPPED;
// WAITING -> DISCARDED; LAUNCHED|RUNNING -> STOPPING -> STOPPED.
const (
	StateWaiting   State = "WAITING"
	StateLaunched  State = "LAUNCHED"
	StateRunning   State = "RUNNING"
	StateStopping  State = "STOPPING"
	StateSucceeded State = "SUCCEEDED"
	StateFailed    State = "FAILED"
	StateStopped   State = "STOPPED"
	StateDiscarded State = "DISCARDED"
)

// Final reports whether no further transition is possible.
func (s State) Final() bool {
	switch s {
	case StateSucceeded, StateFailed, StateStopped, StateDiscarded:
		return true
	}
	return false
}

// Active reports whether the run counts against max_active (LAUNCHED, RUNNING, STOPPING).
func (s State) Active() bool {
	return s == StateLaunched || s == StateRunning || s == StateStopping
}

// Attempt is one attempt of a run with retries (Run.Attempts).
type Attempt struct {
	N                     int
	Worker                string
	StartedAt, FinishedAt time.Time
	Outcome               State // SUCCEEDED, FAILED or STOPPED
	Reason                string
}

// parseAttempts parses a run's attempts field (attempt_log in _lib.lua).
func parseAttempts(v string) []Attempt {
	if v == "" {
		return nil
	}
	var out []Attempt
	for _, e := range strings.Split(v, "\x1e") {
		p := strings.SplitN(e, "\x1f", 6)
		if len(p) < 6 {
			continue
		}
		n, _ := strconv.Atoi(p[0])
		st, _ := strconv.ParseInt(p[2], 10, 64)
		fin, _ := strconv.ParseInt(p[3], 10, 64)
		out = append(out, Attempt{N: n, Worker: p[1], StartedAt: msTime(st), FinishedAt: msTime(fin), Outcome: State(p[4]), Reason: p[5]})
	}
	return out
}

// Assignment is one task slot of a run: (worker, slot index, token), task 0..k-1.
type Assignment struct {
	Worker string
	Slot   int
	Token  string
	Task   int
}

// Run is a run record.
type Run struct {
	ID, Group                                      string
	Seq                                            int64
	State                                          State
	Slots, Priority                                int
	Payload                                        string
	Duration                                       time.Duration
	Policy, PolicyVersion                          string       // of the decision that launched it (Decision: the last that moved it)
	Decision                                       *RunDecision // nil: no decision moved it (waiting, or a client's stop)
	SubmittedAt, LaunchedAt, StartedAt, FinishedAt time.Time
	Reason                                         string
	Assignments                                    []Assignment // set at allocation, by task
	// NotBefore: not launched before it (zero: none); a WAITING run with
	// NotBefore ahead is not due yet (a delay, or a retry's backoff).
	NotBefore time.Time
	Timeout   time.Duration // per attempt; 0 = none
	// Attempt is the current attempt (1 before any retry), of MaxAttempts.
	Attempt, MaxAttempts int
	RetryBase, RetryCap  time.Duration // with MaxAttempts > 1
	// Attempts are its finished attempts, oldest first (the last
	// 20 kept), recorded when MaxAttempts > 1.
	Attempts []Attempt
	// Schedule is the schedule that submitted it ("" = a client).
	Schedule string
	// What its last finished attempt produced: a handler's result, the
	// tail of a program's output, its exit code (nil: none).
	Result, Output string
	ExitCode       *int
	// Labels are the run's labels, sorted by key (SubmitRequest.Labels).
	Labels []abi.Label
	// Require are its own requirements of a worker (SubmitRequest.Require),
	// on top of its group's.
	Require []abi.Label
	// SameWorker: its own flag that all of its slots go to one worker
	// (SubmitRequest.SameWorker).
	SameWorker bool
	// Prefer are its own preferences of a worker (SubmitRequest.Prefer),
	// sorted by key.
	Prefer []abi.Preference
	// Progress is what its handler last reported of the attempt (nil:
	// nothing; SetProgress).
	Progress *Progress
	// TraceParent is the W3C traceparent it was submitted with ("" =
	// none; SubmitRequest.TraceParent).
	TraceParent string
}

// runFields is the order of run fields returned by scripts and HMGET.
// The decision record is one field, dec (apply.lua); runs decided before
// it existed carry it in the fields decision..decision_policy_version.
var runFields = []string{"id", "group", "seq", "state", "slots", "priority", "payload", "duration_ms",
	"policy", "policy_version", "submitted_at", "launched_at", "started_at", "finished_at", "reason", "assign",
	"decision", "decision_epoch", "decided_at", "decision_action", "decision_reason", "policy_sha256", "policy_registry",
	"decision_policy", "decision_policy_version", "dec",
	"not_before", "timeout_ms", "attempt", "max_attempts", "backoff", "attempts", "schedule",
	"result", "output", "exit_code", "labels", "rreq", "progress", "tp"}

// RunDecision is the record of the decision that launched, discarded or
// stopped a run.
type RunDecision struct {
	ID             string // the decision's claim id, epoch:group:version
	Epoch          int64  // the leader's term
	At             time.Time
	Action         ActionKind
	Reason         string // the policy's
	Policy         string
	PolicyVersion  string // sha256 prefix
	PolicySHA256   string
	PolicyRegistry int // the registry version; 0 = the built-in
}

func runFieldArgs() []any {
	a := make([]any, len(runFields))
	for i, f := range runFields {
		a[i] = f
	}
	return a
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// parseRun builds a Run from values in runFields order; ok false if absent.
func parseRun(vals []any) (Run, bool) {
	if len(vals) < len(runFields) || vals[0] == nil {
		return Run{}, false
	}
	atoi := func(i int) int { n, _ := strconv.Atoi(str(vals[i])); return n }
	r := Run{
		ID: str(vals[0]), Group: str(vals[1]), Seq: toInt64(vals[2]), State: State(str(vals[3])),
		Slots: atoi(4), Priority: atoi(5), Payload: str(vals[6]),
		Duration: time.Duration(toInt64(vals[7])) * time.Millisecond,
		Policy:   str(vals[8]), PolicyVersion: str(vals[9]),
		SubmittedAt: msTime(toInt64(vals[10])), LaunchedAt: msTime(toInt64(vals[11])),
		StartedAt: msTime(toInt64(vals[12])), FinishedAt: msTime(toInt64(vals[13])),
		Reason: str(vals[14]), Assignments: parseAssign(str(vals[15])),
		Decision: parseRunDecision(vals),
	}
	parseRunTime(&r, vals[26:])
	return r, true
}

// parseRunTime fills r's time fields from not_before, timeout_ms,
// attempt, max_attempts, backoff, attempts.
func parseRunTime(r *Run, vals []any) {
	if len(vals) < 6 {
		return
	}
	r.NotBefore = msTime(toInt64(vals[0]))
	r.Timeout = time.Duration(toInt64(vals[1])) * time.Millisecond
	r.Attempt, r.MaxAttempts = max(int(toInt64(vals[2])), 1), max(int(toInt64(vals[3])), 1)
	_, retry := groupRunDefaults(nil, nil, vals[4])
	r.RetryBase, r.RetryCap = retry.Base, retry.Cap
	r.Attempts = parseAttempts(str(vals[5]))
	if len(vals) > 9 {
		r.Schedule, r.Result, r.Output = str(vals[6]), str(vals[7]), str(vals[8])
		if vals[9] != nil {
			n := int(toInt64(vals[9]))
			r.ExitCode = &n
		}
	}
	if len(vals) > 10 {
		r.Labels = decodeLabels(str(vals[10]))
	}
	if len(vals) > 11 {
		r.Require, r.SameWorker, r.Prefer = splitReq(decodeLabels(str(vals[11])))
	}
	if len(vals) > 12 {
		r.Progress = parseProgress(str(vals[12]))
	}
	if len(vals) > 13 {
		r.TraceParent = str(vals[13])
	}
}

func parseRunDecision(vals []any) *RunDecision {
	if len(vals) >= 26 && vals[25] != nil {
		return parseDecision(str(vals[25]))
	}
	if len(vals) < 25 || vals[16] == nil {
		return nil
	}
	return &RunDecision{ID: str(vals[16]), Epoch: toInt64(vals[17]), At: msTime(toInt64(vals[18])),
		Action: ActionKind(str(vals[19])), Reason: str(vals[20]), Policy: str(vals[23]), PolicyVersion: str(vals[24]),
		PolicySHA256: str(vals[21]), PolicyRegistry: int(toInt64(vals[22]))}
}

// parseDecision parses a run's dec field: claim, epoch, decided_at (ms),
// action, policy, policy version, sha256, registry version, reason,
// 0x1f-separated (the reason last: it may contain anything).
func parseDecision(v string) *RunDecision {
	p := strings.SplitN(v, "\x1f", 9)
	if len(p) < 9 {
		return nil
	}
	epoch, _ := strconv.ParseInt(p[1], 10, 64)
	at, _ := strconv.ParseInt(p[2], 10, 64)
	reg, _ := strconv.Atoi(p[7])
	return &RunDecision{ID: p[0], Epoch: epoch, At: msTime(at), Action: ActionKind(p[3]), Policy: p[4],
		PolicyVersion: p[5], PolicySHA256: p[6], PolicyRegistry: reg, Reason: p[8]}
}

// parseAssign parses "worker#index#token#task,..." (worker may contain '#').
func parseAssign(s string) []Assignment {
	if s == "" {
		return nil
	}
	var out []Assignment
	for _, e := range strings.Split(s, ",") {
		p := strings.Split(e, "#")
		if len(p) < 4 {
			continue
		}
		n := len(p)
		slot, _ := strconv.Atoi(p[n-3])
		task, _ := strconv.Atoi(p[n-1])
		out = append(out, Assignment{Worker: strings.Join(p[:n-3], "#"), Slot: slot, Token: p[n-2], Task: task})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}

// flatAssign parses a script's flat {worker, index, token, task, ...} reply.
func flatAssign(v any) []Assignment {
	a, _ := v.([]any)
	var out []Assignment
	for i := 0; i+3 < len(a); i += 4 {
		slot, _ := strconv.Atoi(str(a[i+1]))
		task, _ := strconv.Atoi(str(a[i+3]))
		out = append(out, Assignment{Worker: str(a[i]), Slot: slot, Token: str(a[i+2]), Task: task})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// GetRun reads a run (ErrNotFound if absent).
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	if err := limits.ValidateName("run", id); err != nil {
		return Run{}, err
	}
	v, err := s.c.HMGet(ctx, s.k.Run(id), runFields...).Result()
	if err != nil {
		return Run{}, fmt.Errorf("storage: get run %s: %w", id, err)
	}
	r, ok := parseRun(v)
	if !ok {
		return Run{}, fmt.Errorf("storage: get run: run %s: %w", id, ErrNotFound)
	}
	return r, nil
}

// GetRuns reads the runs ids in ONE pipelined round trip, in order; an
// absent run is left out. At most MaxGetRuns ids per call (ErrInvalid).
func (s *Store) GetRuns(ctx context.Context, ids []string) ([]Run, error) {
	if len(ids) > MaxGetRuns {
		return nil, invalid("get runs", "%d ids, at most %d per call", len(ids), MaxGetRuns)
	}
	for _, id := range ids {
		if err := limits.ValidateName("run", id); err != nil {
			return nil, err
		}
	}
	return s.getRuns(ctx, ids)
}

// MaxGetRuns bounds the ids of one GetRuns call.
const MaxGetRuns = 10_000

// RunFilter selects runs for ListRuns; zero fields match everything.
type RunFilter struct {
	Group string
	State State
	Limit int   // <= 0: 1000
	Below int64 // > 0: only runs with a smaller seq (the next page after a run of seq Below)
	// Labels: only runs carrying every one of them (key and value).
	Labels []abi.Label
}

// match reports whether r passes f's group, state and labels.
func (f RunFilter) match(r *Run) bool {
	if (f.Group != "" && r.Group != f.Group) || (f.State != "" && r.State != f.State) {
		return false
	}
	for _, l := range f.Labels {
		if !slices.Contains(r.Labels, l) {
			return false
		}
	}
	return true
}

// listRuns lists runs, newest first (by seq), filtered.
func (s *Store) listRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	p, err := s.ListRunsPage(ctx, f)
	return p.Runs, err
}

// RunPage is one page of ListRunsPage.
type RunPage struct {
	Runs []Run
	// Next is the seq to pass as RunFilter.Below for the next page; 0
	// when no older run exists (filtered or not).
	Next int64
}

// ListRunsPage lists up to f.Limit runs, newest first, with seq below
// f.Below, and where the next page starts. It reads the runs index in
// pages of 500 (and each page's run records in one pipeline) until Limit
// runs match or the index ends.
func (s *Store) ListRunsPage(ctx context.Context, f RunFilter) (RunPage, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	if f.Below < 0 {
		return RunPage{}, invalid("list runs", "below %d is negative", f.Below)
	}
	top := "+inf"
	if f.Below > 0 {
		top = "(" + strconv.FormatInt(f.Below, 10)
	}
	var out RunPage
	const page = 500
	var last int64
	for offset := int64(0); len(out.Runs) < f.Limit; offset += page {
		zs, err := s.c.ZRevRangeByScoreWithScores(ctx, s.k.Runs(), &redis.ZRangeBy{Max: top, Min: "-inf", Offset: offset, Count: page}).Result()
		if err != nil {
			return RunPage{}, fmt.Errorf("storage: list runs: %w", err)
		}
		if len(zs) == 0 {
			last = 0
			break
		}
		ids := make([]string, len(zs))
		for i, z := range zs {
			ids[i], _ = z.Member.(string)
		}
		runs, err := s.getRuns(ctx, ids)
		if err != nil {
			return RunPage{}, err
		}
		last = int64(zs[len(zs)-1].Score)
		for _, r := range runs {
			if f.match(&r) {
				out.Runs = append(out.Runs, r)
				if len(out.Runs) == f.Limit {
					last = r.Seq
					break
				}
			}
		}
		if len(zs) < page {
			if len(out.Runs) < f.Limit {
				last = 0 // the index ended
			}
			break
		}
	}
	if last > 0 {
		n, err := s.c.ZCount(ctx, s.k.Runs(), "-inf", "("+strconv.FormatInt(last, 10)).Result()
		if err != nil {
			return RunPage{}, fmt.Errorf("storage: list runs: %w", err)
		}
		if n > 0 {
			out.Next = last
		}
	}
	return out, nil
}

func (s *Store) getRuns(ctx context.Context, ids []string) ([]Run, error) {
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.k.Run(id), runFields...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: read runs: %w", err)
	}
	out := make([]Run, 0, len(ids))
	for _, c := range cmds {
		if r, ok := parseRun(c.Val()); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// TraceParents reads the trace context each run was submitted with
// (Run.TraceParent; "" = none, or no such run), in order, in one
// pipelined round trip: the leader reads those of the runs its decisions
// acted on for its decision spans, only while it traces.
func (s *Store) TraceParents(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.k.Run(id), "tp")
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("storage: read trace contexts: %w", err)
	}
	out := make([]string, len(ids))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// QueuePosition returns a WAITING run's place in its group's queue: how
// many waiting runs are older (0 = the head) and how many wait in all, in
// one round trip. ok is false when the run is not waiting in group.
func (s *Store) QueuePosition(ctx context.Context, group, id string) (ahead, total int64, ok bool, err error) {
	if err := limits.ValidateName("group", group); err != nil {
		return 0, 0, false, err
	}
	var rank *redis.IntCmd
	var card *redis.IntCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		rank = p.ZRank(ctx, s.k.Waiting(group), id)
		card = p.ZCard(ctx, s.k.Waiting(group))
		return nil
	})
	if err != nil && err != redis.Nil {
		return 0, 0, false, fmt.Errorf("storage: queue position: %w", err)
	}
	if rank.Err() == redis.Nil {
		return 0, card.Val(), false, nil
	}
	return rank.Val(), card.Val(), true, nil
}

// SlotQueuePosition is where a LAUNCHED run waits for slots: how many
// launched runs are ahead of it in the slot manager's queue (ok false: it
// is not in it) and how many slots are free in the namespace (on live and
// not yet reaped workers alike).
func (s *Store) SlotQueuePosition(ctx context.Context, id string) (ahead, free int64, ok bool, err error) {
	var rank, card *redis.IntCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		rank = p.ZRank(ctx, s.k.Launched(), id)
		card = p.ZCard(ctx, s.k.Free())
		return nil
	})
	if err != nil && err != redis.Nil {
		return 0, 0, false, fmt.Errorf("storage: slot queue position: %w", err)
	}
	if rank.Err() == redis.Nil {
		return 0, card.Val(), false, nil
	}
	return rank.Val(), card.Val(), true, nil
}

// RequestStop is a client's stop request: WAITING -> DISCARDED, LAUNCHED ->
// STOPPED, RUNNING -> STOPPING (the worker finishes it); a final run is
// ErrBadState, an unknown run ErrNotFound. Bumps the group version.
func (s *Store) RequestStop(ctx context.Context, id, reason string) (Run, error) {
	const op = "stop"
	if len(reason) > maxStopReason {
		return Run{}, invalid(op, "run %s: reason is %d bytes, at most %d", id, len(reason), maxStopReason)
	}
	g, err := s.runGroup(ctx, op, id)
	if err != nil {
		return Run{}, err
	}
	k := s.k
	if _, err := s.run(ctx, op, "request_stop",
		[]string{k.Run(id), k.Group(g), k.Waiting(g), k.Active(g), k.Launched(), k.Dirty(), k.Finished(g), k.WaitInfo(g), k.Retire(), k.Delayed(g), k.LaunchInfo()},
		id, g, reason, k.RunEvents(), k.SlotEventsPrefix(), k.WorkEvents()); err != nil {
		return Run{}, err
	}
	return s.GetRun(ctx, id)
}

// runGroup reads the (immutable) group of a run.
func (s *Store) runGroup(ctx context.Context, op, id string) (string, error) {
	if err := limits.ValidateName("run", id); err != nil {
		return "", fmt.Errorf("storage: %s: %w", op, err)
	}
	g, err := s.c.HGet(ctx, s.k.Run(id), "group").Result()
	if err == redis.Nil {
		return "", fmt.Errorf("storage: %s: run %s: %w", op, id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("storage: %s: run %s: %w", op, id, err)
	}
	return g, nil
}
