package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RunEvent is one run's state change as a script announced it on
// Keys.RunEvents: the run, its group and the state it entered.
type RunEvent struct {
	Run   string
	Group string
	State State
}

// parseRunEvents parses a Keys.RunEvents payload, space-separated
// "STATE#group#id" (names never hold '#' or whitespace: ValidateName).
// Malformed entries are skipped.
func parseRunEvents(payload string) []RunEvent {
	var out []RunEvent
	for _, e := range strings.Fields(payload) {
		st, rest, ok := strings.Cut(e, "#")
		if !ok {
			continue
		}
		g, id, ok := strings.Cut(rest, "#")
		if !ok || g == "" || id == "" || st == "" {
			continue
		}
		out = append(out, RunEvent{Run: id, Group: g, State: State(st)})
	}
	return out
}

// RunBatch is what one script announced. Missed reports that events may
// have been lost before this batch (the watcher fell behind, or its
// connection dropped and was re-established): a watcher that must not
// miss a change re-reads the runs it follows.
type RunBatch struct {
	Events []RunEvent
	Missed bool
}

// runWatchBuffer is how many batches a RunWatch holds for a slow reader;
// beyond it batches are dropped and the next one is marked Missed, so a
// stalled reader costs bounded memory and never slows the scripts.
const runWatchBuffer = 256

// RunWatch follows the namespace's run events (WatchRuns).
type RunWatch struct {
	C <-chan RunBatch // closed when the watch ends (Close, or its context)

	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// WatchRuns subscribes to the namespace's run events and returns once the
// subscription is confirmed: every state change committed after it
// returns is delivered (or reported Missed). The caller reads C and calls
// Close; cancelling ctx ends the watch too.
func (s *Store) WatchRuns(ctx context.Context) (*RunWatch, error) {
	ps := s.c.Subscribe(ctx, s.k.RunEvents())
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("storage: watch runs: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan RunBatch, runWatchBuffer)
	w := &RunWatch{C: ch, ps: ps, cancel: cancel, done: make(chan struct{})}
	go w.loop(ctx, ch)
	go func() {
		// A blocked Receive does not watch its context: closing the
		// connection ends it.
		<-ctx.Done()
		_ = ps.Close()
	}()
	return w, nil
}

func (w *RunWatch) loop(ctx context.Context, ch chan<- RunBatch) {
	defer close(w.done)
	defer close(ch)
	missed := false
	for {
		m, err := w.ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			// The connection dropped: go-redis reconnects and resubscribes
			// on the next Receive; what was published meanwhile is lost.
			missed = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		msg, ok := m.(*redis.Message)
		if !ok {
			// A (re)subscription confirmation or a pong. After a dropped
			// connection the resubscription says so at once, without
			// waiting for the next event (which may be long in coming).
			if _, resub := m.(*redis.Subscription); resub && missed {
				select {
				case ch <- RunBatch{Missed: true}:
					missed = false
				default:
				}
			}
			continue
		}
		b := RunBatch{Events: parseRunEvents(msg.Payload), Missed: missed}
		select {
		case ch <- b:
			missed = false
		default:
			missed = true // the reader is behind: drop, and say so next time
		}
	}
}

// Close ends the watch and its connection; C is closed.
func (w *RunWatch) Close() error {
	var err error
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	return err
}

// WorkEventSep separates the messages of several groups in one
// work-events message: a report call of many runs (report.lua) sends its
// groups' messages as one PUBLISH.
const WorkEventSep = "\x1c"

// SplitWorkEvents returns the messages one work-events message carries:
// itself, or the groups' messages of a report call (WorkEventSep), each
// for ParseWorkEvent / ParseWorkRef; a leading generation (WorkEventGen)
// is not one of them.
func SplitWorkEvents(payload string) []string {
	if strings.HasPrefix(payload, WorkGenPrefix) {
		_, payload, _ = strings.Cut(payload, WorkEventSep)
	}
	if !strings.Contains(payload, WorkEventSep) {
		return []string{payload}
	}
	return strings.Split(payload, WorkEventSep)
}

// WorkGenPrefix starts a report call's work-events message when it hands
// back snapshots or references (report.lua): "#gen=N" then
// WorkEventSep, N the policy registry generation (Keys.PolicyGen) when
// the report ran. A leader whose policies are at generation N has all it
// needs to decide the handed-back groups (WorkEventGen).
const WorkGenPrefix = "#gen="

// WorkEventGen returns the policy generation a work-events message was
// sent at (ok = false: the message does not say).
func WorkEventGen(payload string) (gen int64, ok bool) {
	rest, found := strings.CutPrefix(payload, WorkGenPrefix)
	if !found {
		return 0, false
	}
	if i := strings.Index(rest, WorkEventSep); i >= 0 {
		rest = rest[:i]
	}
	gen, err := strconv.ParseInt(rest, 10, 64)
	return gen, err == nil && gen >= 0
}

// QuietWorkEvent reports whether msg (one of SplitWorkEvents) is a
// report's "group<US>-": the report left its group with nothing to
// decide (no active run, none waiting, no wake pending; it is not in
// dirty). ParseWorkEvent reads it as the group's name.
func QuietWorkEvent(msg string) bool {
	g, found := strings.CutSuffix(msg, "\x1f-")
	return found && g != "" && !strings.ContainsAny(g, "\x1f\x1c")
}

// WorkRef is a report's hand-back by reference (report.lua): the group is
// at Version, one past the version the leader's last apply left it at,
// nothing but that report changed it since, and it has no active run; Now
// is the report's clock. A leader that kept the view its apply left (the
// snapshot it decided, less the runs the decision took) has the group's
// snapshot at Version without reading it.
//
// For a view of a truncated window (Decision.Gap) the reference also
// carries Gap: the runs of the window's gap the next window shows (the
// first ViewGap.Oldest and the last ViewGap.Newest of them, by seq), which
// the view lacks; WorkRef.View merges them in.
type WorkRef struct {
	Group   string
	Version int64
	Now     time.Time
	Gap     []Run // ordered by seq
}

// ViewGap is what the view a decision leaves of a truncated window lacks
// of the group's next window: the WAITING runs between seqs Lo and Hi
// (exclusive; the runs the window left out) shift into it, the first
// Oldest of them into its oldest part (one for each run the decision took
// from there), the last Newest into its newest part. The zero ViewGap is
// a whole window's: nothing lacks.
type ViewGap struct {
	Lo, Hi         int64
	Oldest, Newest int
}

// LeaveView returns the view a decision that takes the runs taken
// (launched or discarded) leaves of sn: sn less those runs, their count
// off its waiting total, and, when sn's window is truncated, the gap the
// report that hands the group back by reference fills (report.lua). ok is
// false when the view cannot stand for the next window: a taken run that
// is not in the window.
func LeaveView(sn Snapshot, taken map[string]bool) (v Snapshot, gap ViewGap, ok bool) {
	gap, oldest, ok := viewGap(sn, taken)
	if !ok {
		return Snapshot{}, ViewGap{}, false
	}
	v = sn
	v.Waiting = make([]Run, 0, len(sn.Waiting)-len(taken))
	for _, r := range sn.Waiting {
		if !taken[r.ID] {
			v.Waiting = append(v.Waiting, r)
		}
	}
	v.WaitingTotal = sn.WaitingTotal - len(taken)
	v.Group.Waiting = v.WaitingTotal
	v.WaitingOldest = oldest
	return v, gap, true
}

// GapOf is LeaveView's gap and ok alone, without making the view.
func GapOf(sn Snapshot, taken map[string]bool) (ViewGap, bool) {
	gap, _, ok := viewGap(sn, taken)
	return gap, ok
}

// viewGap counts what LeaveView leaves: the gap (zero for a whole
// window), how many runs of the oldest part are left (all of them for a
// whole window), and ok.
func viewGap(sn Snapshot, taken map[string]bool) (gap ViewGap, oldest int, ok bool) {
	n := 0
	for i, r := range sn.Waiting {
		switch {
		case !taken[r.ID]:
			if i < sn.WaitingOldest {
				oldest++
			}
			continue
		case i < sn.WaitingOldest:
			gap.Oldest++
		default:
			gap.Newest++
		}
		n++
	}
	if n != len(taken) {
		return ViewGap{}, 0, false
	}
	if !sn.Truncated() {
		return ViewGap{}, len(sn.Waiting) - n, true
	}
	if sn.WaitingOldest < 1 || sn.WaitingOldest >= len(sn.Waiting) {
		return ViewGap{}, 0, false // a truncated window has both parts
	}
	gap.Lo, gap.Hi = sn.Waiting[sn.WaitingOldest-1].Seq, sn.Waiting[sn.WaitingOldest].Seq
	return gap, oldest, true
}

// View returns view v, left with gap (LeaveView), as the group's snapshot
// at the reference: at its version and clock, with no active run (the
// report ended the last one) and the runs the reference carries merged
// into the window. ok is false when they do not fill the gap as the
// window rule does (the leader then reads the group).
func (ref WorkRef) View(v Snapshot, gap ViewGap) (Snapshot, bool) {
	v.Group.Version = ref.Version
	v.Now = ref.Now
	v.Active = []Run{}
	if gap == (ViewGap{}) {
		if len(ref.Gap) != 0 || v.Truncated() {
			return Snapshot{}, false
		}
		return v, true
	}
	for i, r := range ref.Gap {
		if r.Seq <= gap.Lo || r.Seq >= gap.Hi || (i > 0 && r.Seq <= ref.Gap[i-1].Seq) {
			return Snapshot{}, false
		}
	}
	w := make([]Run, 0, len(v.Waiting)+len(ref.Gap))
	w = append(w, v.Waiting[:v.WaitingOldest]...)
	w = append(w, ref.Gap...)
	w = append(w, v.Waiting[v.WaitingOldest:]...)
	switch {
	case len(w) == v.WaitingTotal: // the whole queue fits the window now
		v.WaitingOldest = len(w)
	case len(ref.Gap) == gap.Oldest+gap.Newest && len(w) < v.WaitingTotal:
		v.WaitingOldest += gap.Oldest
	default:
		return Snapshot{}, false
	}
	v.Waiting = w
	return v, true
}

// ParseWorkRef parses a work-events message that is a WorkRef; ok is
// false for any other message.
func ParseWorkRef(payload string) (ref WorkRef, ok bool) {
	group, rest, found := strings.Cut(payload, "\x1f=")
	if !found {
		return ref, false
	}
	vs, ms, found := strings.Cut(rest, "\x1f")
	ms, entries, more := strings.Cut(ms, "\x1f")
	v, err1 := strconv.ParseInt(vs, 10, 64)
	n, err2 := strconv.ParseInt(ms, 10, 64)
	if !found || err1 != nil || err2 != nil || group == "" || strings.Contains(group, WorkEventSep) {
		return ref, false
	}
	ref = WorkRef{Group: group, Version: v, Now: msTime(n)}
	if more {
		for e := range strings.SplitSeq(entries, "\x1f") {
			id, info, ok := strings.Cut(e, "\x1e")
			r, good := parseWaitInfo(id, info)
			if !ok || !good {
				return WorkRef{}, false
			}
			ref.Gap = append(ref.Gap, r)
		}
	}
	return ref, true
}

// ParseWorkEvent parses a work-events message: a group's name, or (from a
// report that left the group without an active run) the group's name and
// its next snapshot, in the decision view SnapshotBatch reads (report.lua
// documents the form). sn is nil for a bare name, a WorkRef or a malformed
// snapshot.
func ParseWorkEvent(payload string) (group string, sn *Snapshot) {
	group, rest, ok := strings.Cut(payload, "\x1f")
	if !ok {
		return payload, nil
	}
	if strings.HasPrefix(rest, "=") {
		return group, nil // a WorkRef
	}
	p := strings.Split(rest, "\x1f")
	if len(p) < 9 {
		return group, nil
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	g := Group{Name: group, Policy: p[0], MaxActive: int(num(p[1])), Version: num(p[2]), Window: int(num(p[3])),
		DiscardBelow: num(p[4]), Gen: num(p[5])}
	if g.Policy == "" || p[2] == "" {
		return group, nil
	}
	out := &Snapshot{Now: msTime(num(p[6])), WaitingTotal: int(num(p[7])), WaitingOldest: int(num(p[8])),
		Active: []Run{}, Waiting: make([]Run, 0, len(p)-9)}
	entries := p[9:]
	if len(entries) > 0 && strings.HasPrefix(entries[0], "P") && !strings.Contains(entries[0], "\x1e") {
		g.Params = decodeLabels(entries[0][1:]) // the group's policy parameters
		entries = entries[1:]
	}
	for _, e := range entries {
		id, info, ok := strings.Cut(e, "\x1e")
		r, good := parseWaitInfo(id, info)
		if !ok || !good {
			return group, nil
		}
		out.Waiting = append(out.Waiting, r)
	}
	g.Waiting = out.WaitingTotal
	out.Group = g
	return group, out
}
