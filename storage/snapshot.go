package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// Snapshot is a group's state for a decision, read in one script.
type Snapshot struct {
	Group           Group
	Now             time.Time // Redis TIME
	Active, Waiting []Run     // ordered by seq; Waiting is the window
	// WaitingTotal is the number of WAITING runs not covered by the
	// group's discard_below; Waiting holds all of them when it is at most
	// twice the window, else the oldest WaitingOldest then the newest.
	WaitingTotal  int
	WaitingOldest int
	// Launches are the group's latest launches, oldest first (at most
	// abi.MaxLaunches; Keys.Launches).
	Launches []abi.Launch
}

// viewArg is apply.lua's view argument: '1' (the leader keeps the view:
// dv is written), '1,lo,hi,oldest,newest' for a view with a gap (dv
// records it), else '0'.
func viewArg(d Decision) string {
	switch {
	case !d.View:
		return "0"
	case d.Gap == (ViewGap{}):
		return "1"
	}
	return fmt.Sprintf("1,%d,%d,%d,%d", d.Gap.Lo, d.Gap.Hi, d.Gap.Oldest, d.Gap.Newest)
}

// Truncated reports whether the group has WAITING runs beyond the window.
func (sn Snapshot) Truncated() bool { return sn.WaitingTotal > len(sn.Waiting) }

// Snapshot reads a group, its active runs and a window of its waiting runs
// (at most 2·max(window, max_active) of them: snapshot.lua) in ONE round
// trip.
func (s *Store) Snapshot(ctx context.Context, group string) (Snapshot, error) {
	if err := limits.ValidateName("group", group); err != nil {
		return Snapshot{}, err
	}
	c := s.snapshotCall(group, false, runFieldArgs())
	v, err := s.run(ctx, "snapshot", "snapshot", c.keys, c.args...)
	if err == nil {
		vs, es := callResults("snapshot", []int{1}, []any{v}, []error{nil})
		v, err = vs[0], es[0]
	}
	if err != nil {
		return Snapshot{}, err
	}
	return parseSnapshot(group, v, parseRun, false), nil
}

// snapshotGroupsPerCall bounds the groups one snapshot call reads (the
// clock and the call are paid once; 16 windows of 32 runs hold Redis well
// under a millisecond); snapshot.lua also stops a call after the group
// that took its reads past 2,048 runs (big windows), and SnapshotBatch
// sends the rest again.
const snapshotGroupsPerCall = 16

// decisionFields are the run fields SnapshotBatch reads: the ones a policy
// sees (abi.Run: id, seq, state, priority, slots, submitted_at, started_at,
// attempt, max_attempts, not_before, labels).
var decisionFields = []string{"id", "seq", "state", "priority", "slots", "submitted_at", "started_at",
	"attempt", "max_attempts", "not_before", "labels"}

var decisionFieldArgs = func() []any {
	a := make([]any, len(decisionFields))
	for i, f := range decisionFields {
		a[i] = f
	}
	return a
}()

// parseDecisionRun builds a Run from values in DecisionFields order (only
// those fields set); ok false if absent.
func parseDecisionRun(vals []any) (Run, bool) {
	if len(vals) < len(decisionFields) || vals[0] == nil {
		return Run{}, false
	}
	atoi := func(i int) int { n, _ := strconv.Atoi(str(vals[i])); return n }
	return Run{ID: str(vals[0]), Seq: toInt64(vals[1]), State: State(str(vals[2])), Priority: atoi(3), Slots: atoi(4),
		SubmittedAt: msTime(toInt64(vals[5])), StartedAt: msTime(toInt64(vals[6])),
		Attempt: max(atoi(7), 1), MaxAttempts: max(atoi(8), 1), NotBefore: msTime(toInt64(vals[9])),
		Labels: decodeLabels(str(vals[10]))}, true
}

// snapshotCall: indexed reads the waiting runs from the group's WaitInfo
// (DecisionFields only), else each run's fields.
func (s *Store) snapshotCall(group string, indexed bool, fields []any) scriptCall {
	k := s.k
	args := make([]any, 0, 4+len(fields))
	mode := "0"
	if indexed {
		mode = "1"
	}
	args = append(args, k.RunPrefix(), limits.DefaultWindow, mode, abi.MaxLaunches)
	args = append(args, fields...)
	return scriptCall{keys: []string{k.Group(group), k.Waiting(group), k.Active(group), k.WaitInfo(group), k.Launches(group)}, args: args}
}

// parseWaitInfo builds a WAITING run from its WaitInfo entry
// "seq,priority,slots,submitted_ms[,attempt,max_attempts,not_before_ms,labels]"
// (winfo in _lib.lua); ok false if malformed.
func parseWaitInfo(id, v string) (Run, bool) {
	var f [7]int64
	n := 4 // fields; 7 when the entry goes on (then v ends as the labels)
	for i := 0; i < n; i++ {
		x, rest, _ := strings.Cut(v, ",")
		x2, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return Run{}, false
		}
		f[i], v = x2, rest
		if i == 3 && v != "" {
			n = 7
		}
	}
	r := Run{ID: id, Seq: f[0], State: StateWaiting, Priority: int(f[1]), Slots: int(f[2]), SubmittedAt: msTime(f[3]),
		Attempt: 1, MaxAttempts: 1}
	if n == 7 {
		r.Attempt, r.MaxAttempts, r.NotBefore = max(int(f[4]), 1), max(int(f[5]), 1), msTime(f[6])
		r.Labels = decodeLabels(v)
	}
	return r, true
}

// parseLaunch reads a launches list entry "launched_ms,labels".
func parseLaunch(v string) (abi.Launch, bool) {
	ms, labels, _ := strings.Cut(v, ",")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return abi.Launch{}, false
	}
	return abi.Launch{At: n, Labels: decodeLabels(labels)}, true
}

func parseSnapshot(group string, v any, parse func([]any) (Run, bool), indexed bool) Snapshot {
	a, _ := v.([]any)
	if len(a) < 6 {
		return Snapshot{Group: Group{Name: group}}
	}
	g, _ := a[0].([]any)
	for len(g) < 9 {
		g = append(g, nil)
	}
	runs := func(x any) []Run {
		xs, _ := x.([]any)
		out := make([]Run, 0, len(xs))
		for _, e := range xs {
			ev, _ := e.([]any)
			if r, ok := parse(ev); ok {
				out = append(out, r)
			}
		}
		return out
	}
	sn := Snapshot{Now: msTime(toInt64(a[1])), Active: runs(a[2]),
		WaitingTotal: int(toInt64(a[4])), WaitingOldest: int(toInt64(a[5]))}
	if indexed {
		w, _ := a[3].([]any)
		for len(w) < 2 {
			w = append(w, nil)
		}
		ids, _ := w[0].([]any)
		info, _ := w[1].([]any)
		sn.Waiting = make([]Run, 0, len(ids))
		for i, id := range ids {
			if i < len(info) {
				if r, ok := parseWaitInfo(str(id), str(info[i])); ok {
					sn.Waiting = append(sn.Waiting, r)
				}
			}
		}
	} else {
		sn.Waiting = runs(a[3])
	}
	sn.Group = parseGroup(group, groupViewFields, g)
	sn.Group.Waiting, sn.Group.Active = sn.WaitingTotal, len(sn.Active)
	if len(a) > 6 {
		ls, _ := a[6].([]any)
		for i := len(ls) - 1; i >= 0; i-- { // stored newest first
			if l, ok := parseLaunch(str(ls[i])); ok {
				sn.Launches = append(sn.Launches, l)
			}
		}
	}
	return sn
}

// SnapshotResult is one group of a SnapshotBatch.
type SnapshotResult struct {
	Snapshot Snapshot
	Err      error
}

// SnapshotBatch reads the snapshots of groups, all sent in ONE pipelined
// round trip of snapshot calls of up to snapshotGroupsPerCall groups each
// (the coordinator's pass).
// Runs carry only DecisionFields (what a policy sees; no payload, assign,
// policy...). Results are in order; errors are per group (ErrNotFound,
// ErrInvalid), never for the batch.
func (s *Store) SnapshotBatch(ctx context.Context, groups []string) []SnapshotResult {
	out := make([]SnapshotResult, len(groups))
	var parts []scriptCall
	var pos []int
	var args []any
	for i, g := range groups {
		if err := limits.ValidateName("group", g); err != nil {
			out[i].Err = err
			continue
		}
		c := s.snapshotCall(g, true, decisionFieldArgs)
		args = c.args // the same for every group: the call's head
		parts = append(parts, scriptCall{keys: c.keys})
		pos = append(pos, i)
	}
	head := func() scriptCall { return scriptCall{args: args} }
	// A call stops after the group that took it past its read budget
	// (snapshot.lua): the groups it did not reach go again, the first of
	// each call is always read.
	for len(parts) > 0 {
		calls, n := packCalls(head, parts, snapshotGroupsPerCall, nil, 0)
		vals, errs := s.runPipe(ctx, "snapshot", "snapshot", calls)
		vals, errs = callResults("snapshot", n, vals, errs)
		var again []scriptCall
		var againPos []int
		for j, i := range pos {
			switch {
			case errors.Is(errs[j], errNotReached):
				again, againPos = append(again, parts[j]), append(againPos, i)
			case errs[j] != nil:
				out[i].Err = errs[j]
			default:
				out[i].Snapshot = parseSnapshot(groups[i], vals[j], parseDecisionRun, true)
			}
		}
		parts, pos = again, againPos
	}
	return out
}
