package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
)

// SubmitRequest describes a new run.
type SubmitRequest struct {
	Group    string
	ID       string // "" = generated
	Slots    int    // 0 = 1; < 0 is ErrInvalid
	Priority int
	Payload  string
	Duration time.Duration
	// IdempotencyKey (optional, at most MaxIdempotencyKey bytes): a second
	// submit with the same key within idempotencyTTL returns the first
	// one's run (while it exists) instead of submitting another.
	IdempotencyKey string
	// NotBefore (zero = none): the run is not launched before it (Redis
	// time); it waits outside its group's queue until then. A time at or
	// before now is now; at most MaxNotBefore ahead.
	NotBefore time.Time
	// Timeout (0 = the group's run timeout, if any; else none): the worker
	// stops an attempt after it (FAILED "timed out after D"); 1ms..MaxTimeout.
	Timeout time.Duration
	// Retry (zero = the group's): how often and how soon a FAILED attempt
	// is tried again.
	Retry Retry
	// Labels (at most abi.MaxLabels, see ValidLabel; any order, each key
	// once) are the run's keys: policies see them (ABI v4), RunFilter.Label
	// selects by one.
	Labels []abi.Label
	// Require (at most abi.MaxLabels, bounded as labels) are labels a
	// worker must carry to take the run, on top of its group's
	// (GroupSettings.Require; a key in both: the run's value).
	Require []abi.Label
	// SameWorker puts all of the run's slots on one worker (as its group's
	// GroupSettings.SameWorker does for every run of it).
	SameWorker bool
	// Prefer (at most abi.MaxLabels, weights 1 to 1000) are labels a
	// worker had better carry: soft, on top of its group's
	// (GroupSettings.Prefer; a key in both: the run's).
	Prefer []abi.Preference
	// TraceParent (optional) is the W3C traceparent of the span that
	// submitted the run (a version 00 one, tracing.Valid): kept on the run
	// (Run.TraceParent) and handed to whoever executes it, so the
	// leader's and the worker's spans join the submitter's trace. It is
	// not part of the idempotency fingerprint.
	TraceParent string
}

// Idempotency bounds.
const (
	idempotencyTTL = 24 * time.Hour
)

// Bounds of what a client stores with a run: a payload is handed to the
// worker as is (pass a reference, not the data); a stop reason is shown
// with the run.
const (
	maxStopReason = 1024
)

// Submit adds a WAITING run (namespace-wide seq), bumps the group version and
// marks it dirty. An unknown group is created with policy "wait" and
// max_active 1. An existing ID is ErrDuplicate; a go-redis retry of the same
// call is recognised by its op id and returns the run.
func (s *Store) Submit(ctx context.Context, r SubmitRequest) (Run, error) {
	run, _, err := s.SubmitReplay(ctx, r)
	return run, err
}

// SubmitReplay is Submit that also says whether the run was there
// already: replayed by the same call's retry, or named by r.IdempotencyKey
// (then the run is the stored one, read back whole).
func (s *Store) SubmitReplay(ctx context.Context, r SubmitRequest) (Run, bool, error) {
	r, c, err := s.submitCall(r)
	if err == nil {
		err = s.checkRunSlots(ctx, r)
	}
	if err != nil {
		return Run{}, false, err
	}
	cs, _ := packCalls(s.submitShared, []scriptCall{c}, 1, nil, 0)
	v, err := s.run(ctx, "submit", "submit", cs[0].keys, cs[0].args...)
	if err == nil {
		var vs []any
		var es []error
		vs, es = callResults("submit", []int{1}, []any{v}, []error{nil})
		v, err = vs[0], es[0]
	}
	if err != nil {
		return Run{}, false, err
	}
	run := submittedRun(r, v)
	if a, _ := v.([]any); len(a) >= 3 && toInt64(a[2]) == 1 && r.IdempotencyKey != "" {
		got, err := s.GetRun(ctx, run.ID)
		if err != nil {
			return Run{}, false, err
		}
		return got, true, nil
	}
	a, _ := v.([]any)
	return run, len(a) >= 3 && toInt64(a[2]) == 1, nil
}

func (s *Store) submitCall(r SubmitRequest) (SubmitRequest, scriptCall, error) {
	const op = "submit"
	if err := limits.ValidateName("group", r.Group); err != nil {
		return r, scriptCall{}, err
	}
	explicitID := r.ID != ""
	if !explicitID {
		r.ID = newID("r-")
	}
	// what the checks below call the run: its id when the caller named it
	// (a generated one was never created: an error must not name it)
	name := "run " + r.ID
	if !explicitID {
		name = "the run"
	}
	if err := limits.ValidateName("run", r.ID); err != nil {
		return r, scriptCall{}, err
	}
	nb, err := r.check(op, name)
	if err != nil {
		return r, scriptCall{}, err
	}
	labels := r.Labels
	timeout, maxa := "", ""
	if r.Timeout > 0 {
		timeout = strconv.FormatInt(r.Timeout.Milliseconds(), 10)
	}
	if r.Retry.MaxAttempts > 0 {
		maxa = strconv.Itoa(r.Retry.MaxAttempts)
	}
	k := s.k
	idem := "0"
	if r.IdempotencyKey != "" {
		idem = "1"
	}
	c := scriptCall{
		keys: []string{k.Group(r.Group), k.Waiting(r.Group), k.WaitInfo(r.Group), k.Delayed(r.Group), k.Run(r.ID)},
		args: []any{idem, r.Group, r.ID, r.Slots, r.Priority, r.Payload, r.Duration.Milliseconds(), newID("op-"),
			nb, timeout, maxa, r.Retry.backoff(), encodeLabels(labels)},
	}
	if r.IdempotencyKey != "" {
		c.keys = append(c.keys, k.Idempotency(digest.SHA256([]byte(r.IdempotencyKey))))
		explicit := "0"
		if explicitID {
			explicit = "1"
		}
		c.args = append(c.args, idempotencyTTL.Milliseconds(), r.fingerprint(), explicit)
	}
	// the layout's bits (submit.lua): 1 idempotency, 2 requirements, 4
	// a trace context, their args in that order
	lay := 0
	if idem == "1" {
		lay = 1
	}
	if wire := r.placeWire(); len(wire) > 0 {
		lay |= 2
		c.args = append(c.args, encodeLabels(wire))
	}
	if r.TraceParent != "" {
		lay |= 4
		c.args = append(c.args, r.TraceParent)
	}
	c.args[0] = strconv.Itoa(lay)
	return r, c, nil
}

// check validates r's values (name: how an error calls the run), fills
// its default slots and normalizes its keys; nb is its not_before in unix
// ms (0: none).
func (r *SubmitRequest) check(op, name string) (nb int64, err error) {
	if r.Slots < 0 {
		return 0, invalid(op, "%s: slots %d is negative", name, r.Slots)
	}
	if r.Slots > limits.MaxRunSlots {
		return 0, invalid(op, "%s: slots %d: at most %d", name, r.Slots, limits.MaxRunSlots)
	}
	if r.Slots == 0 {
		r.Slots = 1
	}
	if r.Duration < 0 {
		return 0, invalid(op, "%s: duration %v is negative", name, r.Duration)
	}
	if r.Priority < math.MinInt32 || r.Priority > math.MaxInt32 {
		return 0, invalid(op, "%s: priority %d outside %d..%d (a policy reads it as a 32-bit integer)", name, r.Priority, math.MinInt32, math.MaxInt32)
	}
	if len(r.Payload) > limits.MaxPayload {
		return 0, invalid(op, "%s: payload is %d bytes, at most %d (pass a reference to the data)", name, len(r.Payload), limits.MaxPayload)
	}
	if len(r.IdempotencyKey) > limits.MaxIdempotencyKey {
		return 0, invalid(op, "idempotency key is %d bytes, at most %d", len(r.IdempotencyKey), limits.MaxIdempotencyKey)
	}
	if !r.NotBefore.IsZero() {
		if time.Until(r.NotBefore) > limits.MaxNotBefore {
			return 0, invalid(op, "%s: not_before %s is more than %v ahead", name, r.NotBefore.UTC().Format(time.RFC3339), limits.MaxNotBefore)
		}
		nb = max(r.NotBefore.UnixMilli(), 0)
	}
	if r.Timeout != 0 {
		if err := validTimeout(op, name, r.Timeout); err != nil {
			return 0, err
		}
	}
	if err := r.Retry.validate(op, name); err != nil {
		return 0, err
	}
	if r.TraceParent != "" && !tracing.Valid(r.TraceParent) {
		tp := r.TraceParent
		if len(tp) > 64 {
			tp = tp[:64] + "..."
		}
		return 0, invalid(op, "%s: traceparent %q is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", name, tp)
	}
	if err := r.normalizeKeys(); err != nil {
		return 0, invalid(op, "%s: %v", name, err)
	}
	return nb, nil
}

// submitShared is what every run of a submit call shares: its first keys
// and args (submit.lua's header).
func (s *Store) submitShared() scriptCall {
	k := s.k
	return scriptCall{
		keys: []string{k.Seq(), k.Groups(), k.Dirty(), k.Runs(), k.GroupGen(), k.Timers()},
		args: []any{k.WorkEvents(), k.RunEvents(), Retry{Base: limits.DefaultRetryBase, Cap: limits.DefaultRetryCap}.backoff(), k.RunPrefix()},
	}
}

// submitRunsPerCall bounds the runs one submit call carries (the clock and
// the call's messages are paid once: issue 23).
const submitRunsPerCall = 64

// packCalls packs parts, in order, into calls of one script: each call is
// head() (its shared keys and args) followed by its parts' keys and args,
// at most perCall parts and, with weights, parts weighing at most
// maxWeight together (a heavier part goes alone). It returns the calls and
// how many parts each carries (callResults spreads their replies).
func packCalls(head func() scriptCall, parts []scriptCall, perCall int, weights []int, maxWeight int) ([]scriptCall, []int) {
	var calls []scriptCall
	var n []int
	w := 0
	for i, p := range parts {
		pw := 0
		if weights != nil {
			pw = weights[i]
		}
		if len(n) == 0 || n[len(n)-1] == perCall || (maxWeight > 0 && w > 0 && w+pw > maxWeight) {
			calls, n, w = append(calls, head()), append(n, 0), 0
		}
		c := &calls[len(calls)-1]
		c.keys = append(c.keys, p.keys...)
		c.args = append(c.args, p.args...)
		n[len(n)-1]++
		w += pw
	}
	return calls, n
}

// errNotReached is a part's result when its call stopped before it (a
// snapshot call's read budget): send it again.
var errNotReached = errors.New("storage: not reached by its call")

// callResults spreads the results of calls of n[j] parts each (a call's
// error is each of its parts'; a part's error reply is mapped by
// scriptErr with op).
func callResults(op string, n []int, vals []any, errs []error) ([]any, []error) {
	var ov []any
	var oe []error
	for j, cnt := range n {
		rs, _ := vals[j].([]any)
		for m := range cnt {
			switch {
			case errs[j] != nil:
				ov, oe = append(ov, nil), append(oe, errs[j])
			case m >= len(rs):
				ov, oe = append(ov, nil), append(oe, errNotReached)
			default:
				if e, ok := rs[m].(error); ok {
					ov, oe = append(ov, nil), append(oe, scriptErr(op, e))
					continue
				}
				ov, oe = append(ov, rs[m]), append(oe, nil)
			}
		}
	}
	return ov, oe
}

// fingerprint names what a request asks for (not its run id: submit.lua
// compares a chosen id itself), so a reused idempotency key is recognised
// as the same request or refused (ErrConflict) as another one.
func (r SubmitRequest) fingerprint() string {
	b := fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%s\x00%d\x00%d\x00%d\x00%s\x00%s",
		r.Group, r.Slots, r.Priority, r.Duration.Milliseconds(), r.Payload,
		r.NotBefore.UnixMilli(), r.Timeout.Milliseconds(), r.Retry.MaxAttempts, r.Retry.backoff(), encodeLabels(r.Labels))
	return digest.Short(digest.SHA256(append(b, requireSuffix(r.placeWire())...)))
}

// requireSuffix is the fingerprint's part for a run's requirements ("" for
// none, so a run without keeps the fingerprint it always had).
// normalizeKeys checks and sorts r's labels, requirements and
// preferences.
func (r *SubmitRequest) normalizeKeys() (err error) {
	if r.Labels, err = limits.NormalizeLabels("labels", r.Labels, abi.MaxLabels); err != nil {
		return err
	}
	if r.Require, err = limits.NormalizeLabels("requirements", r.Require, abi.MaxLabels); err != nil {
		return err
	}
	r.Prefer, err = limits.NormalizePreferences(r.Prefer)
	return err
}

// placeWire is what the run asks of a worker in the scripts' form: its
// requirements, the same-worker flag, its preferences.
func (r *SubmitRequest) placeWire() []abi.Label {
	return withPrefer(withSame(r.Require, r.SameWorker), r.Prefer)
}

func requireSuffix(req []abi.Label) string {
	if len(req) == 0 {
		return ""
	}
	return "\x00require=" + encodeLabels(req)
}

func submittedRun(r SubmitRequest, v any) Run {
	a, _ := v.([]any)
	for len(a) < 7 {
		a = append(a, nil)
	}
	if id, ok := a[3].(string); ok && id != "" {
		r.ID = id
	}
	run := Run{ID: r.ID, Group: r.Group, Seq: toInt64(a[0]), State: StateWaiting, Slots: r.Slots,
		Priority: r.Priority, Payload: r.Payload, Duration: r.Duration.Truncate(time.Millisecond),
		SubmittedAt: msTime(toInt64(a[1])), Timeout: time.Duration(toInt64(a[5])) * time.Millisecond,
		Attempt: 1, MaxAttempts: max(int(toInt64(a[6])), 1), Labels: r.Labels, Require: r.Require, SameWorker: r.SameWorker,
		Prefer: r.Prefer, TraceParent: r.TraceParent}
	if toInt64(a[4]) == 0 && toInt64(a[2]) == 0 {
		run.NotBefore = time.UnixMilli(r.NotBefore.UnixMilli())
	}
	return run
}

// SubmitResult is one run of a SubmitBatch.
type SubmitResult struct {
	Run Run
	Err error
}

// SubmitBatch is Submit for many runs (same checks, same replay rule):
// submit calls of up to submitRunsPerCall runs each, all sent in ONE
// pipelined round trip, in order (seqs follow the order). Errors are per
// run (ErrDuplicate, ErrInvalid, ErrConflict), never for the batch.
func (s *Store) SubmitBatch(ctx context.Context, reqs []SubmitRequest) []SubmitResult {
	out := make([]SubmitResult, len(reqs))
	filled := make([]SubmitRequest, len(reqs)) // with defaults (generated id, slots 1)
	calls := make([]scriptCall, 0, len(reqs))
	pos := make([]int, 0, len(reqs))
	for i, r := range reqs {
		r, c, err := s.submitCall(r)
		if err == nil {
			err = s.checkRunSlots(ctx, r)
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		filled[i] = r
		calls = append(calls, c)
		pos = append(pos, i)
	}
	calls, n := packCalls(s.submitShared, calls, submitRunsPerCall, nil, 0)
	vals, errs := s.runPipe(ctx, "submit", "submit", calls)
	vals, errs = callResults("submit", n, vals, errs)
	for j, i := range pos {
		if errs[j] != nil {
			out[i].Err = errs[j]
			continue
		}
		out[i].Run = submittedRun(filled[i], vals[j])
	}
	return out
}
