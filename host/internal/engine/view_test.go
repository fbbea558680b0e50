package engine

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// TestCoordinator_viewByReference: after a pass launched a group's oldest
// run, the report of that run (the only change since) hands back a
// reference, and the snapshot the coordinator makes of it from the view
// its apply left is the one SnapshotBatch reads then: group, version,
// window, totals, no active run.
func TestCoordinator_viewByReference(t *testing.T) {
	ctx := context.Background()
	e := newREnv(t, Config{})
	c := e.rt.coord
	c.leading.Store(true)
	e.group("gv", "wait", 1)
	e.worker("w1", 4, time.Hour)
	for _, id := range []string{"v-1", "v-2", "v-3"} {
		e.submit("gv", id, 1)
	}
	if r := e.st.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "gv", ID: "v-4", Priority: 7,
		Labels: []abi.Label{{Key: "tier", Value: "gold"}}}})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	e.settle()
	e.wantStates([]string{"v-1", "v-2"}, storage.StateRunning, storage.StateWaiting)
	ps := e.st.Subscribe(ctx, keyspace.Of(e.st).WorkEvents())
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	e.finish("v-1")
	m, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref, ok := storage.ParseWorkRef(storage.SplitWorkEvents(m.Payload)[0])
	if !ok {
		t.Fatalf("the report's message %q: want a reference", m.Payload)
	}
	c.offerRef(ref)
	got := c.takeOffered([]string{"gv"})["gv"]
	want := e.st.SnapshotBatch(ctx, []string{"gv"})[0]
	if want.Err != nil {
		t.Fatal(want.Err)
	}
	w := want.Snapshot
	if got.Now.IsZero() || !reflect.DeepEqual(got.Group, w.Group) || !reflect.DeepEqual(got.Waiting, w.Waiting) ||
		len(got.Active) != 0 || len(w.Active) != 0 || got.WaitingTotal != w.WaitingTotal ||
		got.WaitingOldest != w.WaitingOldest || len(got.Launches) != len(w.Launches) {
		t.Fatalf("by reference:\n%+v\nSnapshotBatch reads:\n%+v", got, w)
	}
	// the next pass decides from it: v-2 runs
	e.settle()
	e.wantStates([]string{"v-2"}, storage.StateRunning)
}

// TestCoordinator_viewByReference_truncated: in a group deeper than its
// window, each report (the only change since the leader's apply) hands
// back a reference with the runs that shift into the next window, and the
// snapshot the coordinator makes of it is the one SnapshotBatch reads,
// handoff after handoff until the window holds the whole queue (wait:
// each launch from the oldest part; storage's
// TestReport_referenceGap takes from the newest part).
func TestCoordinator_viewByReference_truncated(t *testing.T) {
	for _, window := range []int{2, 3} {
		t.Run(fmt.Sprint("window", window), func(t *testing.T) {
			ctx := context.Background()
			e := newREnv(t, Config{})
			c := e.rt.coord
			c.leading.Store(true)
			g := "gt"
			if _, err := e.st.SetGroupSettings(ctx, g, storage.GroupSettings{Policy: "wait", MaxActive: 1, Window: window}); err != nil {
				t.Fatal(err)
			}
			e.worker("w1", 4, time.Hour)
			var ids []string
			for i := range 4*window + 1 {
				id := fmt.Sprintf("%s-%d", g, i+1)
				ids = append(ids, id)
				e.submit(g, id, 1)
			}
			e.settle()
			ps := e.st.Subscribe(ctx, keyspace.Of(e.st).WorkEvents())
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			withGap, truncated := 0, 0
			for handoff := 1; handoff < len(ids); handoff++ {
				running := ""
				for i, st := range e.states(ids...) {
					if st == storage.StateRunning {
						running = ids[i]
					}
				}
				if running == "" {
					t.Fatalf("handoff %d: no run RUNNING", handoff)
				}
				e.finish(running)
				m, err := ps.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				ref, ok := storage.ParseWorkRef(storage.SplitWorkEvents(m.Payload)[0])
				if !ok {
					t.Fatalf("handoff %d: the report's message %q: want a reference", handoff, m.Payload)
				}
				if len(ref.Gap) > 0 {
					withGap++
				}
				if !c.offerRef(ref) {
					t.Fatalf("handoff %d: reference %+v not offered", handoff, ref)
				}
				got := c.takeOffered([]string{g})[g]
				want := e.st.SnapshotBatch(ctx, []string{g})[0]
				if want.Err != nil {
					t.Fatal(want.Err)
				}
				w := want.Snapshot
				if w.Truncated() {
					truncated++
				}
				if !reflect.DeepEqual(got.Group, w.Group) || !reflect.DeepEqual(got.Waiting, w.Waiting) ||
					len(got.Active) != 0 || len(w.Active) != 0 || got.WaitingTotal != w.WaitingTotal ||
					got.WaitingOldest != w.WaitingOldest {
					t.Fatalf("handoff %d, by reference:\n%+v\nSnapshotBatch reads:\n%+v", handoff, got, w)
				}
				e.settle()
			}
			// 4k+1 runs, window k: the window is truncated while more
			// than 2k wait (the first 2k handoffs); the reference of each
			// carried a run (the one that shifts into the oldest part)
			if truncated < 2*window-1 || withGap < 2*window {
				t.Fatalf("%d snapshots truncated, %d references with a gap: want %d and %d", truncated, withGap,
					2*window-1, 2*window)
			}
		})
	}
}

// TestCoordinator_offerRef: a reference becomes an offered snapshot only
// for the view one version before it, whether it comes after the apply's
// view was kept or before; a view a reference cannot stand for is not
// kept; none of it while not leading.
func TestCoordinator_offerRef(t *testing.T) {
	e := newREnv(t, Config{})
	c := e.rt.coord
	now := time.UnixMilli(1_700_000_000_000)
	sn := func() storage.Snapshot {
		return storage.Snapshot{Group: storage.Group{Name: "g", Policy: "wait", MaxActive: 1, Version: 5, Waiting: 2},
			Now: now, Active: []storage.Run{}, WaitingTotal: 2, WaitingOldest: 2,
			Waiting: []storage.Run{{ID: "a", Seq: 1}, {ID: "b", Seq: 2}}}
	}
	launchA := storage.Decision{Version: 5, View: true, Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "a"}}}
	ref := func(v int64) storage.WorkRef {
		return storage.WorkRef{Group: "g", Version: v, Now: now.Add(time.Second)}
	}
	offered := func() (storage.Snapshot, bool) {
		s, ok := c.takeOffered([]string{"g"})["g"]
		return s, ok
	}
	check := func(name string, s storage.Snapshot, ok bool, version int64) {
		t.Helper()
		if !ok || s.Group.Version != version || len(s.Waiting) != 1 || s.Waiting[0].ID != "b" || s.WaitingTotal != 1 ||
			s.Group.Waiting != 1 || len(s.Active) != 0 || !s.Now.Equal(now.Add(time.Second)) {
			t.Fatalf("%s: offered %v %+v, want b alone at version %d", name, ok, s, version)
		}
	}

	viewable := func(s storage.Snapshot, d storage.Decision) bool {
		ok, _ := c.viewable(s, d)
		return ok
	}
	if viewable(sn(), launchA) {
		t.Fatal("not leading: viewable")
	}
	c.keepView(sn(), launchA, 6)
	c.offerRef(ref(7))
	if _, ok := offered(); ok {
		t.Fatal("not leading: a view was kept")
	}
	c.leading.Store(true)
	if !viewable(sn(), launchA) {
		t.Fatal("leading, an untruncated window, a plain launch: not viewable")
	}

	c.keepView(sn(), launchA, 6)
	c.offerRef(ref(7))
	s, ok := offered()
	check("reference after the view", s, ok, 7)

	c.offerRef(ref(9)) // comes before its apply's reply
	c.keepView(sn(), launchA, 8)
	s, ok = offered()
	check("reference before the view", s, ok, 9)

	c.keepView(sn(), launchA, 6)
	c.offerRef(ref(8)) // something else changed the group too
	if s, ok := offered(); ok {
		t.Fatalf("a reference two versions past the view: offered %+v", s)
	}

	c.keepView(sn(), storage.Decision{Version: 5, Actions: launchA.Actions}, 6) // not View
	c.offerRef(ref(7))
	if s, ok := offered(); ok {
		t.Fatalf("a decision without View: offered %+v", s)
	}
	c.mu.Lock()
	delete(c.refs, "g")
	c.mu.Unlock()

	for name, mod := range map[string]func(*storage.Snapshot, *storage.Decision){
		"truncated, no newest part": func(s *storage.Snapshot, _ *storage.Decision) { s.WaitingTotal = 9 },
		"again":                     func(_ *storage.Snapshot, d *storage.Decision) { d.Again = true },
		"discard_below":             func(_ *storage.Snapshot, d *storage.Decision) { d.Below = 2 },
		"wake asked":                func(_ *storage.Snapshot, d *storage.Decision) { d.WakeAt = 1 },
		"wake pending":              func(s *storage.Snapshot, _ *storage.Decision) { s.Group.WakeAt = now },
		"history":                   func(_ *storage.Snapshot, d *storage.Decision) { d.History = true },
		"paused":                    func(s *storage.Snapshot, _ *storage.Decision) { s.Group.Paused = true },
		"big window": func(s *storage.Snapshot, _ *storage.Decision) {
			for i := len(s.Waiting); i <= maxViewRuns; i++ {
				s.Waiting = append(s.Waiting, storage.Run{ID: fmt.Sprint("w", i), Seq: int64(i + 1)})
			}
			s.WaitingTotal, s.WaitingOldest = len(s.Waiting), len(s.Waiting)
		},
	} {
		s, d := sn(), launchA
		d.View = false
		mod(&s, &d)
		if viewable(s, d) {
			t.Fatalf("%s: viewable", name)
		}
		d.View, d.Gap = c.viewable(s, d)
		c.keepView(s, d, 10)
		c.offerRef(ref(11))
		if got, ok := offered(); ok {
			t.Fatalf("%s: a view was kept and offered %+v", name, got)
		}
		c.mu.Lock()
		delete(c.refs, "g")
		c.mu.Unlock()
	}

	// no room for more views: a new group's decision is not viewable (its
	// reports hand back snapshots), a group that has one still is
	c.keepView(sn(), launchA, 6)
	c.mu.Lock()
	for i := len(c.views); i < maxOffered; i++ {
		c.views[fmt.Sprint("other", i)] = keptView{}
	}
	c.mu.Unlock()
	other := sn()
	other.Group.Name = "new"
	if viewable(other, launchA) || !viewable(sn(), launchA) {
		t.Fatalf("with %d views: new group viewable %v, g viewable %v, want false and true", maxOffered,
			viewable(other, launchA), viewable(sn(), launchA))
	}
}

// TestCoordinator_Pass_handedBack: a pass after work messages that all
// handed their groups back (here a report's reference) at the policy
// generation this host holds decides those groups without reading dirty
// or the generation: one round trip less a handoff. A message without
// the generation (an older worker), a generation the host does not hold
// (a policy pushed since), a group named without its snapshot (a
// submit's message) or a last read of dirty older than fullReadEvery
// each make the pass read dirty as before (a group a report left with
// nothing to decide does not); every handoff launches the next run.
func TestCoordinator_Pass_handedBack(t *testing.T) {
	ctx := context.Background()
	e := newREnv(t, Config{})
	c := e.rt.coord
	c.leading.Store(true)
	e.group("gh", "wait", 1)
	e.worker("w1", 4, time.Hour)
	ids := []string{"h-1", "h-2", "h-3", "h-4", "h-5", "h-6", "h-7"}
	for _, id := range ids {
		e.submit("gh", id, 1)
	}
	e.settle()
	e.wantStates(ids[:2], storage.StateRunning, storage.StateWaiting)
	ps := e.st.Subscribe(ctx, keyspace.Of(e.st).WorkEvents())
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	dirty := &keyReads{key: keyspace.Of(e.st).Dirty()}
	e.rdb.AddHook(dirty)
	for i, tc := range []struct {
		name     string
		edit     func(payload string) string // what the listener gets
		extra    string                      // a second message after it
		old      bool                        // the last read of dirty is older than fullReadEvery
		wantRead bool
	}{
		{name: "at the host's generation", edit: func(p string) string { return p }},
		{name: "no generation", edit: func(p string) string { return storage.SplitWorkEvents(p)[0] }, wantRead: true},
		{name: "another generation", edit: func(p string) string {
			return storage.WorkGenPrefix + "5" + storage.WorkEventSep + storage.SplitWorkEvents(p)[0]
		}, wantRead: true},
		{name: "a group named alone", edit: func(p string) string { return p }, extra: "gh", wantRead: true},
		{name: "a quiet group", edit: func(p string) string { return p }, extra: "gq\x1f-"},
		{name: "an old read", edit: func(p string) string { return p }, old: true, wantRead: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.finish(ids[i])
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if gen, ok := storage.WorkEventGen(m.Payload); !ok || gen != 0 {
				t.Fatalf("the report's message %q: want a hand-back at generation 0", m.Payload)
			}
			e.rt.workEvent(tc.edit(m.Payload))
			if tc.extra != "" {
				e.rt.workEvent(tc.extra)
			}
			if tc.old {
				c.lastRead.Store(time.Now().Add(-2 * fullReadEvery).UnixNano())
			}
			before, handed := dirty.n.Load(), e.rt.Counts()["passes.handed_back"]
			if !e.pass() {
				t.Fatal("the pass did nothing")
			}
			reads := dirty.n.Load() - before
			if (reads > 0) != tc.wantRead || reads > 1 {
				t.Fatalf("the pass read dirty %d times, want a read: %v", reads, tc.wantRead)
			}
			if got := e.rt.Counts()["passes.handed_back"] - handed; got != map[bool]int64{false: 1, true: 0}[tc.wantRead] {
				t.Fatalf("passes.handed_back +%d", got)
			}
			e.wantStates(ids[i:i+2], storage.StateSucceeded, storage.StateRunning)
		})
	}
}
