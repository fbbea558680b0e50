package storage

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// ActionKind is the kind of a decision action.
type ActionKind string

// Action kinds.
const (
	ActionLaunch  ActionKind = "launch"
	ActionDiscard ActionKind = "discard"
	ActionStop    ActionKind = "stop"
)

// Action is one decision on one run.
type Action struct {
	Kind   ActionKind
	Run    string
	Reason string
}

// Decision is a policy's decision for one group snapshot.
type Decision struct {
	Version       int64  // the snapshot's group version
	ClaimID       string // unique per decision; "" = none (no replay detection)
	Policy        string // recorded on launched runs
	PolicyVersion string
	Actions       []Action
	// Below (> 0) discards every WAITING run with a smaller seq that the
	// actions leave WAITING, with BelowReason: the apply raises the
	// group's discard_below, the runs leave every snapshot at once and the
	// leader drains them in chunks (Drain).
	Below       int64
	BelowReason string
	// PolicySHA256 and PolicyRegistry (0 = the built-in) complete the
	// record of the policy version on every run the decision names.
	PolicySHA256   string
	PolicyRegistry int
	// Again keeps the group dirty after a non-empty apply: set when the
	// snapshot's window was truncated, so the group is decided again on
	// its next window.
	Again bool
	// WakeAt (unix ms; 0 = none) asks to decide the group again then (ABI
	// v4): the apply holds it to abi.MinWakeInterval..abi.MaxWakeAhead from
	// Redis time and keeps the group's earliest pending wake; the leader's
	// timer fires it (DueBatch), durable across leaders. An empty decision
	// with a wake still settles the group.
	WakeAt int64
	// History records the decision's launches in the group's launch
	// history (Keys.Launches), which its snapshots then carry: set for a
	// policy that reads them (ABI v4, not a built-in). A decision without
	// it drops the history.
	History bool
	// View says the leader keeps the view this decision leaves (the
	// snapshot less what the decision takes): the apply records the
	// version it leaves (the group's dv), and a report that is the only
	// change after it hands back a reference instead of the snapshot
	// (ParseWorkRef). Without it dv is cleared.
	View bool
	// Gap is, for a View of a truncated window, what the view lacks of
	// the next window (LeaveView): the apply records it with dv, and the
	// report's reference carries those runs (WorkRef.Gap).
	Gap ViewGap
	// NoPlace leaves every launch LAUNCHED for the slot manager (the
	// leader sets it while it knows a LAUNCHED run waits for slots); by
	// default a launch takes its slots at once when they are free and no
	// LAUNCHED run waits for slots (the script checks the queue itself, so
	// no launch overtakes a queued run, whatever the leader knew).
	NoPlace bool
}

// apply applies d to group in one fenced script, all-or-nothing, and
// returns the group's version afterwards. Errors: ErrFenced, ErrDuplicate
// (d.ClaimID already applied; checked before the version), ErrStale,
// ErrNotFound, ErrBadState, ErrInvalid. Zero actions settles the group
// (removes it from dirty if still at d.Version; no bump).
func (s *Store) apply(ctx context.Context, f Fence, group string, d Decision) (int64, error) {
	r := s.ApplyBatch(ctx, f, []GroupDecision{{Group: group, Decision: d}})[0]
	return r.Version, r.Err
}

func parseApply(v any) ApplyResult {
	a, _ := v.([]any)
	for len(a) < 2 {
		a = append(a, nil)
	}
	return ApplyResult{Version: toInt64(a[0]), Queued: int(toInt64(a[1]))}
}

// applyGroupsPerCall bounds the groups one apply call carries: the fence,
// the clock and the free-slot cursor are paid once per call (issue 23:
// ~10 µs of Redis time a group), while a call of 16 groups still holds
// Redis well under a millisecond.
const applyGroupsPerCall = 16

// applyActionsPerCall bounds the actions one apply call carries (a group
// with a big window may decide thousands of runs at once: such a decision
// goes in a call of its own, as before batching).
const applyActionsPerCall = 512

// applyShared is what every group of an apply call shares: its first keys
// and args (apply.lua's header).
func (s *Store) applyShared(f Fence) ([]string, []any) {
	k := s.k
	keys := []string{k.Fence(), k.Lock(), k.Dirty(), k.Launched(), k.Drain(), k.Workers(), k.Slots(), k.Free(), k.Tokens(),
		k.Retire(), k.Timers(), k.LaunchInfo()}
	args := append(f.args(), decisionsKept, k.RunEvents(), k.SlotEventsPrefix(), k.WorkEvents(), abi.MinWakeInterval, abi.MaxWakeAhead)
	return keys, args
}

// applyPart is one group's share of an apply call (its keys and args).
func (s *Store) applyPart(group string, d Decision) (scriptCall, error) {
	const op = "apply"
	if err := limits.ValidateName("group", group); err != nil {
		return scriptCall{}, err
	}
	k := s.k
	if d.Below < 0 {
		return scriptCall{}, invalid(op, "discard_below %d is negative", d.Below)
	}
	keys := make([]string, 0, 7+len(d.Actions))
	keys = append(keys, k.Group(group), k.Waiting(group), k.Active(group), k.Finished(group), k.Decisions(group),
		k.WaitInfo(group), k.Launches(group))
	args := make([]any, 0, 15+3*len(d.Actions))
	hist := 0
	if d.History {
		hist = abi.MaxLaunches
	}
	again := 0
	if d.Again {
		again = 1
	}
	place := "1"
	if d.NoPlace {
		place = "0"
	}
	args = append(args, len(d.Actions), group, d.Version, d.ClaimID, d.Policy, d.PolicyVersion, d.Below, d.BelowReason, again,
		d.PolicySHA256, d.PolicyRegistry, place, max(d.WakeAt, 0), hist, viewArg(d))
	for _, a := range d.Actions {
		if err := limits.ValidateName("run", a.Run); err != nil {
			return scriptCall{}, fmt.Errorf("storage: %s: %w", op, err)
		}
		switch a.Kind {
		case ActionLaunch, ActionDiscard, ActionStop:
		default:
			return scriptCall{}, invalid(op, "unknown action kind %q on run %s", a.Kind, a.Run)
		}
		keys = append(keys, k.Run(a.Run))
		args = append(args, string(a.Kind), a.Run, a.Reason)
	}
	return scriptCall{keys: keys, args: args}, nil
}

// GroupDecision is one group's decision in an ApplyBatch.
type GroupDecision struct {
	Group    string
	Decision Decision
}

// ApplyResult is the outcome of one decision of an ApplyBatch: the group's
// version afterwards and how many of its launches wait in the LAUNCHED
// queue for slots (the others were placed at once), or the error Apply
// would have returned.
type ApplyResult struct {
	Version int64
	Queued  int
	Err     error
}

// ApplyBatch applies every decision (exactly Apply's semantics: fenced,
// version-checked, per group), all sent in ONE pipelined round trip of
// apply calls of up to applyGroupsPerCall groups and applyActionsPerCall
// actions each (a call checks the
// fence and reads the clock once for its groups). Results are in order
// and independent: one group's ErrStale, ErrDuplicate or ErrInvalid leaves
// the others as they are; ErrFenced is every group's of the call. NOSCRIPT
// is handled as in every call (reload, resend the failed ones).
func (s *Store) ApplyBatch(ctx context.Context, f Fence, ds []GroupDecision) []ApplyResult {
	out := make([]ApplyResult, len(ds))
	sk, sa := s.applyShared(f)
	head := func() scriptCall { return scriptCall{keys: slices.Clone(sk), args: slices.Clone(sa)} }
	var (
		parts   []scriptCall
		weights []int
		pos     []int
	)
	for i, gd := range ds {
		part, err := s.applyPart(gd.Group, gd.Decision)
		if err != nil {
			out[i].Err = err
			continue
		}
		parts, weights, pos = append(parts, part), append(weights, len(gd.Decision.Actions)), append(pos, i)
	}
	calls, n := packCalls(head, parts, applyGroupsPerCall, weights, applyActionsPerCall)
	vals, errs := s.runPipe(ctx, "apply", "apply", calls)
	vals, errs = callResults("apply", n, vals, errs)
	for j, i := range pos {
		if out[i].Err = errs[j]; out[i].Err == nil {
			out[i] = parseApply(vals[j])
		}
	}
	return out
}

// GroupDecisionRecord is one entry of a group's decision history.
type GroupDecisionRecord struct {
	At                        time.Time
	ID                        string // claim: epoch:group:version
	Epoch                     int64
	Policy, PolicyVersion     string
	PolicyRegistry            int
	Launched, Discarded, Stop int
	DiscardBelow              int64
}

// GroupDecisions returns group's latest applied decisions (at most
// decisionsKept), newest first.
func (s *Store) GroupDecisions(ctx context.Context, group string) ([]GroupDecisionRecord, error) {
	if err := limits.ValidateName("group", group); err != nil {
		return nil, err
	}
	vs, err := s.c.LRange(ctx, s.k.Decisions(group), 0, decisionsKept-1).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: group decisions: %w", err)
	}
	out := make([]GroupDecisionRecord, 0, len(vs))
	for _, v := range vs {
		if d, ok := parseGroupDecision(v); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// parseGroupDecision parses one entry of a group's decisions list.
func parseGroupDecision(v string) (GroupDecisionRecord, bool) {
	f := strings.Split(v, "\x1f")
	if len(f) < 10 {
		return GroupDecisionRecord{}, false
	}
	n := func(i int) int64 { x, _ := strconv.ParseInt(f[i], 10, 64); return x }
	return GroupDecisionRecord{At: msTime(n(0)), ID: f[1], Epoch: n(2), Policy: f[3], PolicyVersion: f[4],
		PolicyRegistry: int(n(5)), Launched: int(n(6)), Discarded: int(n(7)), Stop: int(n(8)), DiscardBelow: n(9)}, true
}

// LatestDecisions returns each group's latest applied decision (nil for a
// group with none), in ONE pipelined round trip; at most MaxGetRuns groups.
func (s *Store) LatestDecisions(ctx context.Context, groups []string) ([]*GroupDecisionRecord, error) {
	if len(groups) > MaxGetRuns {
		return nil, invalid("latest decisions", "%d groups, at most %d per call", len(groups), MaxGetRuns)
	}
	for _, g := range groups {
		if err := limits.ValidateName("group", g); err != nil {
			return nil, err
		}
	}
	cmds := make([]*redis.StringCmd, len(groups))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, g := range groups {
			cmds[i] = p.LIndex(ctx, s.k.Decisions(g), 0)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("storage: latest decisions: %w", err)
	}
	out := make([]*GroupDecisionRecord, len(groups))
	for i, c := range cmds {
		if d, ok := parseGroupDecision(c.Val()); ok && c.Err() == nil {
			out[i] = &d
		}
	}
	return out, nil
}
