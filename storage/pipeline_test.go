package storage_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// TestStore_SnapshotApplyBatch: the coordinator's pipelined pass. Errors
// are per group (an unknown or invalid group, a stale or duplicate
// decision do not affect the others), every apply is fenced, and runs carry
// the decision fields.
func TestStore_SnapshotApplyBatch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		for _, g := range []string{"g1", "g2", "g3"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: g + "-a", Priority: 3, Payload: "p"}))(t)
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: g + "-b", Slots: 2}))(t)
		}
		mustNil(t, e.s.Load(ctx))
		sc := &cmdCounter{only: "evalsha"}
		e.c.AddHook(sc)
		res := e.s.SnapshotBatch(ctx, []string{"g1", "nope", "g2", "a{b", "g3"})
		if n := sc.n.Load(); n != 1 {
			t.Fatalf("a snapshot batch of 4 valid groups sent %d scripts, want 1 (one call)", n)
		}
		if len(res) != 5 || !errors.Is(res[1].Err, storage.ErrNotFound) || !errors.Is(res[3].Err, storage.ErrInvalid) {
			t.Fatalf("per-group errors = %+v", res)
		}
		for _, i := range []int{0, 2, 4} {
			sn, err := res[i].Snapshot, res[i].Err
			if err != nil || len(sn.Waiting) != 2 || sn.Group.Version != 2 || sn.Now.IsZero() || sn.Group.Policy != "wait" {
				t.Fatalf("snapshot %d = %+v, %v", i, sn, err)
			}
			a, b := sn.Waiting[0], sn.Waiting[1]
			if a.ID != sn.Group.Name+"-a" || a.Priority != 3 || a.State != storage.StateWaiting || a.Seq == 0 || a.SubmittedAt.IsZero() ||
				a.Payload != "" || b.Slots != 2 || b.Seq <= a.Seq {
				t.Fatalf("decision fields of %s = %+v %+v", sn.Group.Name, a, b)
			}
		}
		launch := func(g string, v int64, claim string) storage.GroupDecision {
			return storage.GroupDecision{Group: g, Decision: storage.Decision{Version: v, ClaimID: claim, Policy: "wait", PolicyVersion: "1",
				Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: g + "-a"}}}}
		}

		t.Run("fenced", func(t *testing.T) {
			e.unchanged(t, func() {
				for i, r := range e.s.ApplyBatch(ctx, storage.Fence{Epoch: f.Epoch + 1, Holder: f.Holder},
					[]storage.GroupDecision{launch("g1", 2, "x1"), launch("g2", 2, "x2")}) {
					if !errors.Is(r.Err, storage.ErrFenced) {
						t.Fatalf("apply %d with a stale fence = %+v", i, r)
					}
				}
			})
		})

		// g1 applies; g2 is stale (decided at version 1); g3 names a run of
		// another group; "a{b" is invalid; g1 again with the same claim is a
		// duplicate (the pipeline runs in order).
		bad := launch("g3", 2, "c3")
		bad.Decision.Actions[0].Run = "g1-b"
		cc := &cmdCounter{only: "evalsha"}
		e.c.AddHook(cc)
		out := e.s.ApplyBatch(ctx, f, []storage.GroupDecision{
			launch("g1", 2, "c1"), launch("g2", 1, "c2"), bad, {Group: "a{b"}, launch("g1", 2, "c1")})
		if n := cc.n.Load(); n != 1 {
			t.Fatalf("a batch of 4 valid decisions sent %d commands, want 1 (one apply call)", n)
		}
		switch {
		case out[0].Err != nil || out[0].Version != 3:
			t.Fatalf("g1 = %+v", out[0])
		case !errors.Is(out[1].Err, storage.ErrStale):
			t.Fatalf("g2 = %+v", out[1])
		case !errors.Is(out[2].Err, storage.ErrNotFound):
			t.Fatalf("g3 = %+v", out[2])
		case !errors.Is(out[3].Err, storage.ErrInvalid):
			t.Fatalf("a{b = %+v", out[3])
		case !errors.Is(out[4].Err, storage.ErrDuplicate):
			t.Fatalf("g1 replay = %+v", out[4])
		}
		if r := ok(e.s.GetRun(ctx, "g1-a"))(t); r.State != storage.StateLaunched {
			t.Fatalf("g1-a = %s", r.State)
		}
		for _, id := range []string{"g2-a", "g3-a", "g1-b"} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateWaiting {
				t.Fatalf("%s = %s, want WAITING", id, r.State)
			}
		}
		if ds := ok(e.s.DirtyGroups(ctx, 0))(t); len(ds) != 2 || ds[0] != "g2" || ds[1] != "g3" {
			t.Fatalf("dirty = %v", ds)
		}
	})
}

// TestStore_ApplyBatchPlaces: a batch of 20 groups' launches is two apply
// calls (16 groups each at most) that share the free-slot cursor: the 6
// free slots go to the first 6 launches in batch order, the other 14 queue
// in LAUNCHED in that order; each placed run holds its own slot.
func TestStore_ApplyBatchPlaces(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 4, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "wB", 2, time.Minute))
		var ds []storage.GroupDecision
		for i := range 20 {
			g := fmt.Sprintf("g%02d", i)
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: g + "-a"}))(t)
			ds = append(ds, storage.GroupDecision{Group: g, Decision: storage.Decision{Version: 1, ClaimID: "c" + g,
				Policy: "wait", PolicyVersion: "1", Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: g + "-a"}}}})
		}
		mustNil(t, e.s.Load(ctx))          // the scripts cached: no NOSCRIPT round in the count
		cc := &cmdCounter{only: "evalsha"} // (a pipeline on a new connection also sends its handshake)
		e.c.AddHook(cc)
		out := e.s.ApplyBatch(ctx, f, ds)
		if n := cc.n.Load(); n != 2 {
			t.Fatalf("20 decisions sent %d commands, want 2", n)
		}
		slots := map[string]bool{}
		for i, r := range out {
			run := ok(e.s.GetRun(ctx, ds[i].Group+"-a"))(t)
			want, queued := storage.StateRunning, 0
			if i >= 6 {
				want, queued = storage.StateLaunched, 1
			}
			if r.Err != nil || r.Version != 2 || r.Queued != queued || run.State != want {
				t.Fatalf("%s: %+v, run %s, want %s", ds[i].Group, r, run.State, want)
			}
			if want == storage.StateRunning {
				a := run.Assignments[0]
				slots[fmt.Sprintf("%s#%d", a.Worker, a.Slot)] = true
			}
		}
		if len(slots) != 6 {
			t.Fatalf("placed runs hold %d distinct slots, want 6", len(slots))
		}
		l := ok(e.s.LaunchedRuns(ctx, 0))(t)
		if len(l) != 14 || l[0] != "g06-a" || l[13] != "g19-a" {
			t.Fatalf("launched = %v", l)
		}
	})
}

// TestStore_PipelineNOSCRIPT: a pipelined pass after SCRIPT FLUSH reloads
// the scripts and resends the calls that failed; no error surfaces.
func TestStore_PipelineNOSCRIPT(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		sub := e.s.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "g1", ID: "a"}, {Group: "g2", ID: "b"}})
		for _, r := range sub {
			mustNil(t, r.Err)
		}
		mustNil(t, e.c.ScriptFlush(ctx).Err())
		snaps := e.s.SnapshotBatch(ctx, []string{"g1", "g2"})
		var ds []storage.GroupDecision
		for _, s := range snaps {
			if s.Err != nil || len(s.Snapshot.Waiting) != 1 {
				t.Fatalf("snapshot after SCRIPT FLUSH = %+v", s)
			}
			ds = append(ds, storage.GroupDecision{Group: s.Snapshot.Group.Name, Decision: storage.Decision{
				Version: s.Snapshot.Group.Version, ClaimID: "c-" + s.Snapshot.Group.Name,
				Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: s.Snapshot.Waiting[0].ID}}}})
		}
		mustNil(t, e.c.ScriptFlush(ctx).Err())
		for _, r := range e.s.ApplyBatch(ctx, f, ds) {
			if r.Err != nil {
				t.Fatalf("apply after SCRIPT FLUSH = %+v", r)
			}
		}
		for _, id := range []string{"a", "b"} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateLaunched {
				t.Fatalf("%s = %s", id, r.State)
			}
		}
		mustNil(t, e.c.ScriptFlush(ctx).Err())
		sub = e.s.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "g1", ID: "c"}, {Group: "g1", ID: "a"}})
		if sub[0].Err != nil || sub[0].Run.Seq != 3 || !errors.Is(sub[1].Err, storage.ErrDuplicate) {
			t.Fatalf("submit batch after SCRIPT FLUSH = %+v", sub)
		}
	})
}

// TestStore_ReportBatch: one pipeline of reports, errors per run (a wrong
// token is ErrNotOwner for that run only; nothing written for it).
func TestStore_ReportBatch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := launched(t, e, 1, 1, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wA#1", 3, time.Minute))
		res := ok(e.s.AllocateBatch(ctx, f, []string{"ra", "rb", "rc"}))(t)
		tok := map[string]string{}
		for _, r := range res {
			if r.Outcome != storage.AllocAllocated {
				t.Fatalf("alloc = %+v", res)
			}
			tok[r.Run] = r.Assignments[0].Token
		}
		var errs []error
		e.unchanged(t, func() {
			errs = e.s.ReportBatch(ctx, "wA#1", []storage.ReportReq{{Group: "g", Run: "rb", Token: "bogus", Outcome: storage.StateSucceeded}})
		})
		if !errors.Is(errs[0], storage.ErrNotOwner) {
			t.Fatalf("wrong token = %v", errs[0])
		}
		errs = e.s.ReportBatch(ctx, "wA#1", []storage.ReportReq{
			{Group: "g", Run: "ra", Token: tok["ra"], Outcome: storage.StateSucceeded},
			{Group: "g", Run: "rb", Token: "bogus", Outcome: storage.StateSucceeded},
			{Group: "g", Run: "rc", Token: tok["rc"], Outcome: storage.StateFailed, Reason: "boom"},
			{Group: "g", Run: "rc", Token: tok["rc"], Outcome: storage.StateFailed, Reason: "boom"}, // replay
			{Group: "g", Run: "rb", Token: tok["rb"], Outcome: "DONE"},
		})
		if errs[0] != nil || !errors.Is(errs[1], storage.ErrNotOwner) || errs[2] != nil || errs[3] != nil || !errors.Is(errs[4], storage.ErrInvalid) {
			t.Fatalf("errs = %v", errs)
		}
		for id, want := range map[string]storage.State{"ra": storage.StateSucceeded, "rb": storage.StateRunning, "rc": storage.StateFailed} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != want {
				t.Fatalf("%s = %s, want %s", id, r.State, want)
			}
		}
		if sv := ok(e.s.Slots(ctx))(t); sv.Free != 2 {
			t.Fatalf("free slots = %d, want 2", sv.Free)
		}
	})
}

// TestStore_BatchBounds: what one call may carry is bounded by its work,
// not only by its groups. A snapshot call stops after the group that took
// its reads to 2,048 runs (windows of 1,000: three groups a call, the
// fourth read by a second call, every snapshot whole); an apply call
// carries at most 512 actions (three decisions discarding 300 runs each
// go in three calls), all applied.
func TestStore_BatchBounds(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		groups := []string{"b1", "b2", "b3", "b4"}
		for _, g := range groups {
			ok(e.s.SetGroupSettings(ctx, g, storage.GroupSettings{Window: 1000}))(t)
			var reqs []storage.SubmitRequest
			for i := range 1000 {
				reqs = append(reqs, storage.SubmitRequest{Group: g, ID: fmt.Sprintf("%s-%04d", g, i)})
			}
			for _, r := range e.s.SubmitBatch(ctx, reqs) {
				mustNil(t, r.Err)
			}
		}
		mustNil(t, e.s.Load(ctx))
		cc := &cmdCounter{only: "evalsha"}
		e.c.AddHook(cc)
		snaps := e.s.SnapshotBatch(ctx, groups)
		if n := cc.n.Load(); n != 2 {
			t.Fatalf("4 snapshots of 1,000 runs took %d calls, want 2 (the read budget)", n)
		}
		var ds []storage.GroupDecision
		for i, r := range snaps {
			if r.Err != nil || r.Snapshot.Group.Name != groups[i] || len(r.Snapshot.Waiting) != 1000 || r.Snapshot.WaitingTotal != 1000 {
				t.Fatalf("snapshot %d: %v, %d waiting of %d", i, r.Err, len(r.Snapshot.Waiting), r.Snapshot.WaitingTotal)
			}
			if i == 3 {
				break
			}
			var acts []storage.Action
			for _, w := range r.Snapshot.Waiting[:300] {
				acts = append(acts, storage.Action{Kind: storage.ActionDiscard, Run: w.ID})
			}
			ds = append(ds, storage.GroupDecision{Group: groups[i], Decision: storage.Decision{Version: r.Snapshot.Group.Version,
				ClaimID: "c" + groups[i], Actions: acts}})
		}
		cc.n.Store(0)
		for i, r := range e.s.ApplyBatch(ctx, f, ds) {
			if r.Err != nil {
				t.Fatalf("apply %d: %v", i, r.Err)
			}
		}
		if n := cc.n.Load(); n != 3 {
			t.Fatalf("3 decisions of 300 actions took %d apply calls, want 3 (512 actions a call)", n)
		}
		for _, g := range groups[:3] {
			if r := ok(e.s.GetRun(ctx, g+"-0299"))(t); r.State != storage.StateDiscarded {
				t.Fatalf("%s-0299 = %s, want DISCARDED", g, r.State)
			}
		}
	})
}
