package storage_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// deepGroup fills group g (window w, max_active 1) with n WAITING runs
// r00000..r<n-1> (seqs 1..n in a fresh namespace) and leads the namespace.
func deepGroup(t *testing.T, e *env, n, w int) storage.Fence {
	t.Helper()
	ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Window: w}))(t)
	for lo := 0; lo < n; lo += 500 {
		var batch []storage.SubmitRequest
		for i := lo; i < min(lo+500, n); i++ {
			batch = append(batch, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%05d", i)})
		}
		for _, r := range e.s.SubmitBatch(ctx, batch) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	return e.lead(t, "h#1#a")
}

func ids(runs []storage.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// TestStore_Snapshot_window: a group deeper than twice its window gives a
// snapshot of its oldest and newest window runs, with the total and where
// the parts meet; at most twice the window it gives every run; each part
// holds at least max_active runs.
func TestStore_Snapshot_window(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		deepGroup(t, e, 1000, 3)
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		want := []string{"r00000", "r00001", "r00002", "r00997", "r00998", "r00999"}
		if fmt.Sprint(ids(sn.Waiting)) != fmt.Sprint(want) || sn.WaitingTotal != 1000 || sn.WaitingOldest != 3 ||
			!sn.Truncated() || sn.Group.Waiting != 1000 || sn.Group.Window != 3 {
			t.Fatalf("window %v total %d oldest %d group %+v, want %v of 1000 (3 oldest)", ids(sn.Waiting), sn.WaitingTotal, sn.WaitingOldest, sn.Group, want)
		}
		b := ok(e.s.SnapshotBatch(ctx, []string{"g"})[0].Snapshot, nil)(t)
		if len(b.Waiting) != 6 || b.WaitingTotal != 1000 || b.WaitingOldest != 3 {
			t.Fatalf("SnapshotBatch window %v total %d", ids(b.Waiting), b.WaitingTotal)
		}
		// max_active 5 above the window: each part holds 5
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{MaxActive: 5}))(t)
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		if len(sn.Waiting) != 10 || sn.WaitingOldest != 5 || sn.Waiting[5].ID != "r00995" {
			t.Fatalf("max_active 5: window %v oldest %d", ids(sn.Waiting), sn.WaitingOldest)
		}
		// a window of 500: 1000 runs fit in 2·500, so all of them
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Window: 500}))(t)
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		if len(sn.Waiting) != 1000 || sn.Truncated() || sn.WaitingOldest != 1000 {
			t.Fatalf("window 500: %d runs, oldest %d, truncated %v", len(sn.Waiting), sn.WaitingOldest, sn.Truncated())
		}
	})
}

// TestStore_SetGroupSettings_bounds: window and max_active outside their
// bounds are ErrInvalid and write nothing; a zero keeps the value.
func TestStore_SetGroupSettings_bounds(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Window: 7, MaxActive: 2}))(t)
		for _, gs := range []storage.GroupSettings{{Window: -1}, {Window: limits.MaxWindow + 1}, {MaxActive: limits.MaxMaxActive + 1}} {
			e.unchanged(t, func() {
				if _, err := e.s.SetGroupSettings(ctx, "g", gs); !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("%+v: err %v, want ErrInvalid", gs, err)
				}
			})
		}
		g := ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Policy: "discard"}))(t)
		if g.Window != 7 || g.MaxActive != 2 || g.Policy != "discard" {
			t.Fatalf("after a policy change: %+v, want window 7 and max_active 2 kept", g)
		}
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Window != 7 {
			t.Fatalf("GetGroup window %d", g.Window)
		}
	})
}

// TestStore_Apply_discardBelow: a decision that launches the oldest run and
// discards below the newest seq plus one covers the whole group at once:
// the covered runs leave every snapshot, a launch or discard of one is
// ErrBadState (nothing written), the group is in the drain set, and Drain
// discards them in chunks, with the decision's reason, until none is left.
func TestStore_Apply_discardBelow(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := deepGroup(t, e, 1000, 4)
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		v := ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c1", Policy: "discard", PolicyVersion: "x",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r00000"}}, Below: 1001, BelowReason: "busy", Again: true}))(t)
		if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 1 {
			t.Fatalf("dirty %v after an apply with Again, want g kept dirty", d)
		}
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		if len(sn.Waiting) != 0 || sn.WaitingTotal != 0 || len(sn.Active) != 1 || sn.Group.DiscardBelow != 1001 || sn.Group.Version != v {
			t.Fatalf("snapshot after discard_below: window %v total %d active %v group %+v", ids(sn.Waiting), sn.WaitingTotal, ids(sn.Active), sn.Group)
		}
		if d := ok(e.s.DrainGroups(ctx, 10))(t); fmt.Sprint(d) != "[g]" {
			t.Fatalf("drain groups %v", d)
		}
		// a new run is above the mark: it is in the next snapshot
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "late"}))(t)
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		if fmt.Sprint(ids(sn.Waiting)) != "[late]" || sn.WaitingTotal != 1 {
			t.Fatalf("after a submit: window %v total %d", ids(sn.Waiting), sn.WaitingTotal)
		}
		// a covered run cannot be launched (or discarded), even with a current version
		for _, k := range []storage.ActionKind{storage.ActionLaunch, storage.ActionDiscard} {
			e.unchanged(t, func() {
				_, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c2" + string(k),
					Actions: []storage.Action{{Kind: k, Run: "r00500"}}})
				if !errors.Is(err, storage.ErrBadState) {
					t.Fatalf("%s of a covered run: %v, want ErrBadState", k, err)
				}
			})
		}
		// drain: 999 covered runs in chunks of 400
		if _, _, err := e.s.Drain(ctx, storage.Fence{Epoch: f.Epoch - 1, Holder: f.Holder}, "g", 400); !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("drain by a stale epoch: %v, want ErrFenced", err)
		}
		var got []int
		for {
			n, more, err := e.s.Drain(ctx, f, "g", 400)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
			if !more {
				break
			}
			if len(got) > 5 {
				t.Fatalf("drain does not end: %v", got)
			}
		}
		if fmt.Sprint(got) != "[400 400 199]" {
			t.Fatalf("drain chunks %v, want [400 400 199]", got)
		}
		if d := ok(e.s.DrainGroups(ctx, 10))(t); len(d) != 0 {
			t.Fatalf("drain groups %v after the drain", d)
		}
		r := ok(e.s.GetRun(ctx, "r00999"))(t)
		if r.State != storage.StateDiscarded || r.Reason != "busy" || r.FinishedAt.IsZero() {
			t.Fatalf("drained run %+v", r)
		}
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Waiting != 1 || g.Active != 1 {
			t.Fatalf("group after the drain %+v, want 1 waiting (late), 1 active", g)
		}
		// a lower discard_below later does not lower the mark
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c3", Below: 5, BelowReason: "x"}))(t)
		if sn = ok(e.s.Snapshot(ctx, "g"))(t); sn.Group.DiscardBelow != 1001 || len(sn.Waiting) != 1 {
			t.Fatalf("after a lower discard_below: %+v, window %v", sn.Group, ids(sn.Waiting))
		}
	})
}
