package storage_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// launch applies one launch per id to group g (at its current version)
// and returns the apply's result.
func launch(t *testing.T, e *env, f storage.Fence, g string, ids ...string) storage.ApplyResult {
	t.Helper()
	v := ok(e.s.GetGroup(ctx, g))(t).Version
	d := storage.Decision{Version: v, ClaimID: fmt.Sprintf("c-%s-%d", g, v)}
	for _, id := range ids {
		d.Actions = append(d.Actions, storage.Action{Kind: storage.ActionLaunch, Run: id})
	}
	r := e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: g, Decision: d}})[0]
	mustNil(t, r.Err)
	return r
}

// TestStore_Apply_places: a launch takes its slots in the apply itself
// when they are free (RUNNING at once, its task-0 worker told on
// slot-events); from the first launch that does not fit on, launches
// queue LAUNCHED for the slot manager, in order; with NoPlace (what the
// leader passes while a queued run waits for slots) a launch that would
// fit queues too.
func TestStore_Apply_places(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 3, time.Minute))
		ok(e.s.SetGroup(ctx, "g", "wait", 100))(t)
		for _, r := range []storage.SubmitRequest{{ID: "a", Slots: 2}, {ID: "b", Slots: 2}, {ID: "c", Slots: 1}, {ID: "d", Slots: 1}} {
			r.Group = "g"
			ok(e.s.Submit(ctx, r))(t)
		}
		ps := e.s.Subscribe(ctx, keyspace.Of(e.s).SlotEvents("wA"))
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		// a fits (2 of 3 slots); b does not (1 left): b and c queue, c
		// although it would fit.
		if r := launch(t, e, f, "g", "a", "b", "c"); r.Queued != 2 {
			t.Fatalf("queued %d, want 2 (b, then c behind it)", r.Queued)
		}
		a := ok(e.s.GetRun(ctx, "a"))(t)
		if a.State != storage.StateRunning || len(a.Assignments) != 2 || a.StartedAt.IsZero() || !a.StartedAt.Equal(a.LaunchedAt) {
			t.Fatalf("a = %+v: want RUNNING on 2 slots, started when launched", a)
		}
		msg, err := ps.ReceiveMessage(ctx)
		mustNil(t, err)
		if evs := storage.ParseSlotEvents(msg.Payload); len(evs) != 1 || evs[0].Run != "a" || evs[0].Worker != "wA" {
			t.Fatalf("slot events %q, want a's task-0 slot", msg.Payload)
		}
		for _, id := range []string{"b", "c"} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateLaunched || len(r.Assignments) != 0 {
				t.Fatalf("%s = %s %v, want LAUNCHED without slots", id, r.State, r.Assignments)
			}
		}
		if q := ok(e.s.LaunchedRuns(ctx, 10))(t); !slices.Equal(q, []string{"b", "c"}) {
			t.Fatalf("launched queue %v, want [b c]", q)
		}
		// NoPlace leaves a fitting launch to the slot manager too.
		e2 := e.fresh(t)
		f2 := e2.lead(t, "L#1#b")
		mustNil(t, e2.s.RegisterWorker(ctx, "wB", 1, time.Minute))
		ok(e2.s.Submit(ctx, storage.SubmitRequest{Group: "h", ID: "x"}))(t)
		v := ok(e2.s.GetGroup(ctx, "h"))(t).Version
		r := e2.s.ApplyBatch(ctx, f2, []storage.GroupDecision{{Group: "h", Decision: storage.Decision{Version: v, ClaimID: "c1",
			NoPlace: true, Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "x"}}}}})[0]
		if r.Err != nil || r.Queued != 1 || ok(e2.s.GetRun(ctx, "x"))(t).State != storage.StateLaunched {
			t.Fatalf("NoPlace apply = %+v, run %s; want LAUNCHED", r, ok(e2.s.GetRun(ctx, "x"))(t).State)
		}
	})
}

// TestStore_Apply_noOvertaking: a launch never takes free slots past a
// LAUNCHED run that waits for them, even when the leader did not know of
// it (no NoPlace): a run queued by an earlier call, or by an earlier
// group of the same call, keeps its place ahead of every later launch.
func TestStore_Apply_noOvertaking(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		t.Run("queued before", func(t *testing.T) {
			e := e.fresh(t)
			f := e.lead(t, "L#1#a")
			mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "big", Slots: 3}))(t)
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "h", ID: "small"}))(t)
			if r := launch(t, e, f, "g", "big"); r.Queued != 1 {
				t.Fatalf("big: queued %d, want 1 (3 slots, 2 free)", r.Queued)
			}
			// small fits the 2 free slots, but big waits for them
			if r := launch(t, e, f, "h", "small"); r.Queued != 1 {
				t.Fatalf("small: queued %d, want 1 (big waits ahead of it)", r.Queued)
			}
			if s := ok(e.s.GetRun(ctx, "small"))(t); s.State != storage.StateLaunched || len(s.Assignments) != 0 {
				t.Fatalf("small = %s %v, want LAUNCHED without slots", s.State, s.Assignments)
			}
			if q := ok(e.s.LaunchedRuns(ctx, 10))(t); !slices.Equal(q, []string{"big", "small"}) {
				t.Fatalf("launched queue %v, want [big small]", q)
			}
			if n := ok(e.s.FreeSlots(ctx))(t); n != 2 {
				t.Fatalf("free slots %d, want 2 (nothing placed)", n)
			}
		})
		t.Run("queued in the same call", func(t *testing.T) {
			e := e.fresh(t)
			f := e.lead(t, "L#1#b")
			mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
			var ds []storage.GroupDecision
			for _, r := range []storage.SubmitRequest{{Group: "g1", ID: "a"}, {Group: "g2", ID: "b", Slots: 3}, {Group: "g3", ID: "c"}} {
				ok(e.s.Submit(ctx, r))(t)
				v := ok(e.s.GetGroup(ctx, r.Group))(t).Version
				ds = append(ds, storage.GroupDecision{Group: r.Group, Decision: storage.Decision{Version: v, ClaimID: "c-" + r.Group,
					Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: r.ID}}}})
			}
			res := e.s.ApplyBatch(ctx, f, ds)
			for i, want := range []int{0, 1, 1} {
				if res[i].Err != nil || res[i].Queued != want {
					t.Fatalf("group %s: %+v, want %d queued", ds[i].Group, res[i], want)
				}
			}
			if a := ok(e.s.GetRun(ctx, "a"))(t); a.State != storage.StateRunning || len(a.Assignments) != 1 {
				t.Fatalf("a = %s %v, want RUNNING on 1 slot (the queue was empty)", a.State, a.Assignments)
			}
			// c fits the slot a left, but b (3 slots) queued before it
			if c := ok(e.s.GetRun(ctx, "c"))(t); c.State != storage.StateLaunched {
				t.Fatalf("c = %s, want LAUNCHED behind b", c.State)
			}
			if q := ok(e.s.LaunchedRuns(ctx, 10))(t); !slices.Equal(q, []string{"b", "c"}) {
				t.Fatalf("launched queue %v, want [b c]", q)
			}
		})
	})
}

// TestStore_Apply_placesOnLiveWorkers: a dead worker's free slots are
// skipped (its heartbeat expired; the reaper has not come by yet).
func TestStore_Apply_placesOnLiveWorkers(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wDead", 2, 50*time.Millisecond))
		mustNil(t, e.s.RegisterWorker(ctx, "wLive", 1, time.Minute))
		time.Sleep(120 * time.Millisecond)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a"}))(t)
		if r := launch(t, e, f, "g", "a"); r.Queued != 0 {
			t.Fatalf("queued %d, want a placed", r.Queued)
		}
		if a := ok(e.s.GetRun(ctx, "a"))(t); len(a.Assignments) != 1 || a.Assignments[0].Worker != "wLive" {
			t.Fatalf("a's slots %+v, want wLive's", a.Assignments)
		}
	})
}

// waitIndex is the waiting-run index of g: id -> entry.
func (e *env) waitIndex(t *testing.T, g string) map[string]string {
	t.Helper()
	return ok(e.c.HGetAll(ctx, keyspace.Of(e.s).WaitInfo(g)).Result())(t)
}

// TestStore_WaitInfo: the waiting-run index holds exactly the WAITING runs
// of a group through every script that adds or removes one (submit,
// apply's launch and discard, request_stop, drain, delete_group), and the
// snapshot's decision view of a run is its record's.
func TestStore_WaitInfo(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroup(ctx, "g", "wait", 100))(t)
		for i := range 8 {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%d", i), Slots: 1 + i%3, Priority: i - 4}))(t)
		}
		check := func(when string) {
			t.Helper()
			ids := ok(e.c.ZRange(ctx, keyspace.Of(e.s).Waiting("g"), 0, -1).Result())(t)
			idx := e.waitIndex(t, "g")
			keys := make([]string, 0, len(idx))
			for k := range idx {
				keys = append(keys, k)
			}
			sort.Strings(ids)
			sort.Strings(keys)
			if !slices.Equal(ids, keys) {
				t.Fatalf("%s: index %v, waiting %v", when, keys, ids)
			}
			sn := e.s.SnapshotBatch(ctx, []string{"g"})[0]
			mustNil(t, sn.Err)
			for _, w := range sn.Snapshot.Waiting {
				r := ok(e.s.GetRun(ctx, w.ID))(t)
				if w.Seq != r.Seq || w.Priority != r.Priority || w.Slots != r.Slots || !w.SubmittedAt.Equal(r.SubmittedAt) || w.State != storage.StateWaiting {
					t.Fatalf("%s: snapshot sees %+v, the run is %+v", when, w, r)
				}
			}
		}
		check("after submits")
		v := ok(e.s.GetGroup(ctx, "g"))(t).Version
		mustNil(t, e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: storage.Decision{Version: v, ClaimID: "c1",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r0"}, {Kind: storage.ActionDiscard, Run: "r1"}}}}})[0].Err)
		check("after a launch and a discard")
		ok(e.s.RequestStop(ctx, "r2", "no"))(t)
		check("after a stop request")
		v = ok(e.s.GetGroup(ctx, "g"))(t).Version
		r4 := ok(e.s.GetRun(ctx, "r4"))(t)
		mustNil(t, e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: storage.Decision{Version: v, ClaimID: "c2",
			Below: r4.Seq, Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r5"}}}}})[0].Err)
		for {
			_, more, err := e.s.Drain(ctx, f, "g", 1)
			mustNil(t, err)
			if !more {
				break
			}
		}
		check("after a drain")
		if n := len(e.waitIndex(t, "g")); n != 3 {
			t.Fatalf("index holds %d runs, want r4, r6 and r7 (r3 drained)", n)
		}
		// delete_group wants no active run: stop the launched ones
		for _, id := range []string{"r0", "r5"} {
			ok(e.s.RequestStop(ctx, id, "delete"))(t)
		}
		if _, err := e.s.DeleteGroup(ctx, "g", true, "gone"); err != nil {
			t.Fatal(err)
		}
		if n := ok(e.c.Exists(ctx, keyspace.Of(e.s).WaitInfo("g")).Result())(t); n != 0 {
			t.Fatal("the index outlived its group")
		}
		// the runs delete_group discarded are in the retention index, and
		// the deleted group in retire: retention still removes them
		for _, id := range []string{"r4", "r6", "r7"} {
			if _, err := e.c.ZScore(ctx, keyspace.Of(e.s).Finished("g"), id).Result(); err != nil {
				t.Errorf("%s (discarded by delete_group) is not in the finished index: %v", id, err)
			}
		}
		if _, err := e.c.ZScore(ctx, keyspace.Of(e.s).Retire(), "g").Result(); err != nil {
			t.Errorf("the deleted group is not in retire: %v", err)
		}
	})
}

// TestStore_Snapshot_unindexed: a WAITING run the index lacks (submitted
// before it existed) is read from its hash, and a launch of it works.
func TestStore_Snapshot_unindexed(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "old", Slots: 2, Priority: 7}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "new"}))(t)
		mustNil(t, e.c.HDel(ctx, keyspace.Of(e.s).WaitInfo("g"), "old").Err())
		sn := e.s.SnapshotBatch(ctx, []string{"g"})[0]
		mustNil(t, sn.Err)
		if len(sn.Snapshot.Waiting) != 2 {
			t.Fatalf("waiting %+v", sn.Snapshot.Waiting)
		}
		w, r := sn.Snapshot.Waiting[0], ok(e.s.GetRun(ctx, "old"))(t)
		if w.ID != "old" || w.Seq != r.Seq || w.Slots != 2 || w.Priority != 7 || !w.SubmittedAt.Equal(r.SubmittedAt) {
			t.Fatalf("unindexed run read as %+v, is %+v", w, r)
		}
		if res := launch(t, e, f, "g", "old"); res.Queued != 1 {
			t.Fatalf("launch of the unindexed run: %+v", res)
		}
		if got := ok(e.s.GetRun(ctx, "old"))(t); got.State != storage.StateLaunched {
			t.Fatalf("old is %s", got.State)
		}
	})
}

// TestStore_Retire: every script that ends a run puts its group in the
// retire index; expire rescores the group to when its oldest remaining
// finished run is due (+inf kept forever) and drops it when none is left;
// a retention change puts it back at 0.
func TestStore_Retire(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		k := keyspace.Of(e.s)
		ok(e.s.SetGroup(ctx, "g", "wait", 10))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a"}))(t)
		if n := ok(e.c.ZCard(ctx, k.Retire()).Result())(t); n != 0 {
			t.Fatalf("retire holds %d groups before any run ended", n)
		}
		ok(e.s.RequestStop(ctx, "a", "x"))(t) // WAITING -> DISCARDED
		sc, err := e.c.ZScore(ctx, k.Retire(), "g").Result()
		mustNil(t, err)
		fin := ok(e.s.GetRun(ctx, "a"))(t).FinishedAt
		if int64(sc) != fin.UnixMilli() {
			t.Fatalf("retire score %v, want the finish %d (look then)", sc, fin.UnixMilli())
		}
		due, _, err := e.s.RetireDue(ctx, time.Now().Add(time.Second), 10)
		mustNil(t, err)
		if !slices.Equal(due, []string{"g"}) {
			t.Fatalf("due %v, want [g]", due)
		}
		// retention 1 h: rescored to finish + 1 h, not due now
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: ptr(time.Hour)}))(t)
		if sc := ok(e.c.ZScore(ctx, k.Retire(), "g").Result())(t); sc != 0 {
			t.Fatalf("after a retention change the score is %v, want 0", sc)
		}
		_, _, err = e.s.Expire(ctx, f, "g", 0, 0)
		mustNil(t, err)
		if sc := ok(e.c.ZScore(ctx, k.Retire(), "g").Result())(t); int64(sc) != fin.Add(time.Hour).UnixMilli() {
			t.Fatalf("rescored to %v, want %d", sc, fin.Add(time.Hour).UnixMilli())
		}
		due, next, err := e.s.RetireDue(ctx, time.Now(), 10)
		mustNil(t, err)
		if len(due) != 0 || !next.Equal(fin.Add(time.Hour)) {
			t.Fatalf("due %v next %v, want none due and next %v", due, next, fin.Add(time.Hour))
		}
		// forever: +inf, never due
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: ptr(time.Duration(0))}))(t)
		_, _, err = e.s.Expire(ctx, f, "g", 0, 0)
		mustNil(t, err)
		if sc := ok(e.c.ZScore(ctx, k.Retire(), "g").Result())(t); !math.IsInf(sc, 1) {
			t.Fatalf("kept forever: score %v, want +inf", sc)
		}
		// 1 ms: removed, and the group leaves the index
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: ptr(time.Millisecond)}))(t)
		time.Sleep(5 * time.Millisecond)
		n, _, err := e.s.Expire(ctx, f, "g", 0, 0)
		mustNil(t, err)
		if n != 1 {
			t.Fatalf("expired %d, want 1", n)
		}
		if _, err := e.c.ZScore(ctx, k.Retire(), "g").Result(); err == nil {
			t.Fatal("a group without finished runs stays in retire")
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestStore_Beat: the light heartbeat moves the expiry, reads no slot, and
// answers ErrUnknownWorker for a worker that is not registered.
func TestStore_Beat(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		if err := e.s.Beat(ctx, "wX", time.Minute); !errors.Is(err, storage.ErrUnknownWorker) {
			t.Fatalf("beat of an unknown worker = %v", err)
		}
		mustNil(t, e.s.RegisterWorker(ctx, "wX", 2, 100*time.Millisecond))
		before := ok(e.c.ZScore(ctx, keyspace.Of(e.s).Workers(), "wX").Result())(t)
		time.Sleep(5 * time.Millisecond)
		mustNil(t, e.s.Beat(ctx, "wX", time.Minute))
		after := ok(e.c.ZScore(ctx, keyspace.Of(e.s).Workers(), "wX").Result())(t)
		if after < before+float64(time.Minute.Milliseconds())/2 {
			t.Fatalf("expiry %v -> %v: the beat did not move it a minute on", before, after)
		}
	})
}

// TestStore_GetRun_decisionRecords: the decision record is read from the
// run's one dec field (a reason may hold anything, the separator too), and
// from the separate fields of a run decided before dec existed.
func TestStore_GetRun_decisionRecords(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "new"}))(t)
		v := ok(e.s.GetGroup(ctx, "g"))(t).Version
		odd := "a\x1fb, c"
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c1", Policy: "p", PolicyVersion: "pv", PolicySHA256: "sha", PolicyRegistry: 3,
			Actions: []storage.Action{{Kind: storage.ActionDiscard, Run: "new", Reason: odd}}}))(t)
		d := ok(e.s.GetRun(ctx, "new"))(t).Decision
		if d == nil || d.ID != "c1" || d.Epoch != f.Epoch || d.Action != storage.ActionDiscard || d.Reason != odd ||
			d.Policy != "p" || d.PolicyVersion != "pv" || d.PolicySHA256 != "sha" || d.PolicyRegistry != 3 || d.At.IsZero() {
			t.Fatalf("decision %+v", d)
		}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "old"}))(t)
		mustNil(t, e.c.HSet(ctx, keyspace.Of(e.s).Run("old"), "decision", "7:g:1", "decision_epoch", 7, "decided_at", 1700000000000,
			"decision_action", "launch", "decision_reason", "oldest", "policy_sha256", "s", "policy_registry", 2,
			"decision_policy", "wait", "decision_policy_version", "wv").Err())
		d = ok(e.s.GetRun(ctx, "old"))(t).Decision
		if d == nil || d.ID != "7:g:1" || d.Epoch != 7 || d.At.UnixMilli() != 1700000000000 || d.Action != storage.ActionLaunch ||
			d.Reason != "oldest" || d.Policy != "wait" || d.PolicyVersion != "wv" || d.PolicySHA256 != "s" || d.PolicyRegistry != 2 {
			t.Fatalf("old decision fields read as %+v", d)
		}
	})
}

// TestStore_Report_handsBackTheSnapshot: a report that leaves its group
// without an active run publishes the group's next snapshot on
// work-events, the same decision view SnapshotBatch reads; with an active
// run left (or a window that is not indexed) it publishes only the name.
func TestStore_Report_handsBackTheSnapshot(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 4, time.Minute))
		ok(e.s.SetGroup(ctx, "g", "wait", 2))(t)
		for i := range 5 {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%d", i), Priority: i}))(t)
		}
		launch(t, e, f, "g", "r0", "r1")
		ps := e.s.Subscribe(ctx, keyspace.Of(e.s).WorkEvents())
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		report := func(id string) (string, *storage.Snapshot) {
			t.Helper()
			r := ok(e.s.GetRun(ctx, id))(t)
			mustNil(t, e.s.Report(ctx, "wA", id, r.Assignments[0].Token, storage.StateSucceeded, ""))
			m, err := ps.ReceiveMessage(ctx)
			mustNil(t, err)
			msgs := storage.SplitWorkEvents(m.Payload)
			g, sn := storage.ParseWorkEvent(msgs[0])
			// a hand-back comes with the policy generation it was made at
			if gen, has := storage.WorkEventGen(m.Payload); has != (sn != nil) || gen != 0 || len(msgs) != 1 {
				t.Fatalf("report of %s: message %q: generation %d %v, want one only with a snapshot", id, m.Payload, gen, has)
			}
			return g, sn
		}
		if g, sn := report("r0"); g != "g" || sn != nil {
			t.Fatalf("with r1 still active: %q %+v, want the name alone", g, sn)
		}
		g, sn := report("r1")
		if g != "g" || sn == nil {
			t.Fatalf("with no active run left: %q %v, want a snapshot", g, sn)
		}
		want := e.s.SnapshotBatch(ctx, []string{"g"})[0]
		mustNil(t, want.Err)
		w := want.Snapshot
		if sn.Group.Version != w.Group.Version || sn.Group.Policy != w.Group.Policy || sn.Group.MaxActive != w.Group.MaxActive ||
			sn.Group.Gen != w.Group.Gen || sn.WaitingTotal != w.WaitingTotal || sn.WaitingOldest != w.WaitingOldest ||
			len(sn.Active) != 0 || len(sn.Waiting) != len(w.Waiting) || sn.Now.IsZero() {
			t.Fatalf("handed back %+v, SnapshotBatch reads %+v", sn, w)
		}
		for i := range w.Waiting {
			a, b := sn.Waiting[i], w.Waiting[i]
			if a.ID != b.ID || a.Seq != b.Seq || a.Priority != b.Priority || a.Slots != b.Slots || !a.SubmittedAt.Equal(b.SubmittedAt) {
				t.Fatalf("waiting %d: %+v, SnapshotBatch %+v", i, a, b)
			}
		}
		// an unindexed waiting run: the name alone (the leader reads it);
		// the submit after the launch rules the reference out
		launch(t, e, f, "g", "r2")
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r5"}))(t)
		if _, err := ps.ReceiveMessage(ctx); err != nil { // the submit's
			t.Fatal(err)
		}
		mustNil(t, e.c.HDel(ctx, keyspace.Of(e.s).WaitInfo("g"), "r3").Err())
		if g, sn := report("r2"); g != "g" || sn != nil {
			t.Fatalf("with an unindexed run in the window: %q %+v, want the name alone", g, sn)
		}
	})
}

// handBackEnv leads, registers worker wA (4 slots), gives group g the
// settings gs, submits runs r0..r(n-1) to it and subscribes to
// work-events: the setup of the hand-back tests.
func handBackEnv(t *testing.T, e *env, n int, gs storage.GroupSettings) (storage.Fence, *redis.PubSub) {
	t.Helper()
	f := e.lead(t, "L#1#a")
	mustNil(t, e.s.RegisterWorker(ctx, "wA", 4, time.Minute))
	ok(e.s.SetGroupSettings(ctx, "g", gs))(t)
	for i := range n {
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%d", i)}))(t)
	}
	ps := e.s.Subscribe(ctx, keyspace.Of(e.s).WorkEvents())
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return f, ps
}

// reportMsg reports run id SUCCEEDED as wA and returns the work-events
// message that followed (an apply's wake skipped).
func reportMsg(t *testing.T, e *env, ps *redis.PubSub, id string) string {
	t.Helper()
	r := ok(e.s.GetRun(ctx, id))(t)
	mustNil(t, e.s.Report(ctx, "wA", id, r.Assignments[0].Token, storage.StateSucceeded, ""))
	for {
		m, err := ps.ReceiveMessage(ctx)
		mustNil(t, err)
		if m.Payload != storage.TimerEvent {
			return m.Payload
		}
	}
}

// TestStore_Report_handsBackAReference: a report that is the only change
// to its group since the leader's apply, leaving no active run, hands
// back a reference (the group, its version, the clock), not the snapshot;
// anything else in between (a submit, a pending wake, launch history, a
// decision the leader keeps no view of) gets the snapshot or the name as
// before.
func TestStore_Report_handsBackAReference(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f, ps := handBackEnv(t, e, 6, storage.GroupSettings{})
		report := func(id string) string {
			t.Helper()
			m := reportMsg(t, e, ps, id)
			msgs := storage.SplitWorkEvents(m)
			_, isRef := storage.ParseWorkRef(msgs[0])
			_, sn := storage.ParseWorkEvent(msgs[0])
			// a hand-back comes with the policy generation it was made at
			if gen, has := storage.WorkEventGen(m); has != (isRef || sn != nil) || gen != 0 || len(msgs) != 1 {
				t.Fatalf("report of %s: message %q: generation %d %v, want one group, and the generation with a hand-back", id, m, gen, has)
			}
			return msgs[0]
		}
		apply := func(d storage.Decision) {
			t.Helper()
			d.Version = ok(e.s.GetGroup(ctx, "g"))(t).Version
			d.ClaimID = fmt.Sprint("c", d.Version)
			ok(e.s.Apply(ctx, f, "g", d))(t)
		}
		launchOne := func(id string) storage.Decision {
			return storage.Decision{View: true, Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: id}}}
		}

		apply(launchOne("r0"))
		p := report("r0")
		ref, isRef := storage.ParseWorkRef(p)
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if !isRef || ref.Group != "g" || ref.Version != g.Version || ref.Now.IsZero() {
			t.Fatalf("the only change since the apply: %q (%+v, %v), want a reference at version %d", p, ref, isRef, g.Version)
		}
		if name, sn := storage.ParseWorkEvent(p); name != "g" || sn != nil {
			t.Fatalf("ParseWorkEvent(%q) = %q %v, want the name alone", p, name, sn)
		}

		// a submit between the apply and the report: the snapshot
		apply(launchOne("r1"))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r9"}))(t)
		if _, err := ps.ReceiveMessage(ctx); err != nil {
			t.Fatal(err)
		}
		if p := report("r1"); func() bool { _, ok := storage.ParseWorkRef(p); return ok }() {
			t.Fatalf("with a submit in between: %q, want no reference", p)
		} else if _, sn := storage.ParseWorkEvent(p); sn == nil {
			t.Fatalf("with a submit in between: %q, want the snapshot", p)
		}

		// a wake pending: the snapshot (a reference would hide the wake)
		d := launchOne("r2")
		d.WakeAt = time.Now().Add(time.Hour).UnixMilli()
		apply(d)
		if p := report("r2"); func() bool { _, ok := storage.ParseWorkRef(p); return ok }() {
			t.Fatalf("with a wake pending: %q, want no reference", p)
		}

		// launch history kept: no reference (its snapshot reads launches)
		e2 := launchOne("r3")
		e2.History = true
		apply(e2)
		if p := report("r3"); func() bool { _, ok := storage.ParseWorkRef(p); return ok }() {
			t.Fatalf("with launch history: %q, want no reference", p)
		}

		// the leader keeps no view of this decision (a truncated window,
		// say): the apply clears dv, no reference
		e3 := launchOne("r4")
		e3.View = false
		apply(e3)
		if p := report("r4"); func() bool { _, ok := storage.ParseWorkRef(p); return ok }() {
			t.Fatalf("a decision without View: %q, want no reference", p)
		} else if _, sn := storage.ParseWorkEvent(p); sn == nil {
			t.Fatalf("a decision without View: %q, want the snapshot", p)
		}
	})
}

// TestStore_Report_referenceGap: a view of a truncated window (window 2,
// eight runs) records its gap with the apply (Decision.Gap, from
// LeaveView), and the report that is the only change after it hands back
// a reference carrying the runs that shift into the next window: the
// newest part's (a launch from there), both parts' until the window holds
// the whole queue (a launch and a discard), and none when the recorded
// gap does not parse or a run of the gap is not indexed (the snapshot
// then). WorkRef.View of each is the snapshot SnapshotBatch reads.
func TestStore_Report_referenceGap(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f, ps := handBackEnv(t, e, 8, storage.GroupSettings{Window: 2})
		snapshot := func() storage.Snapshot {
			t.Helper()
			r := e.s.SnapshotBatch(ctx, []string{"g"})[0]
			mustNil(t, r.Err)
			return r.Snapshot
		}
		// decide applies a decision of kinds (run -> kind) on the group's
		// snapshot with its view and gap, and returns the view and gap
		decide := func(name string, kinds map[string]storage.ActionKind) (storage.Snapshot, storage.ViewGap) {
			t.Helper()
			sn := snapshot()
			d := storage.Decision{Version: sn.Group.Version, ClaimID: name, View: true}
			taken := map[string]bool{}
			for _, r := range sn.Waiting {
				if k, ok := kinds[r.ID]; ok {
					d.Actions = append(d.Actions, storage.Action{Kind: k, Run: r.ID})
					taken[r.ID] = true
				}
			}
			v, gap, good := storage.LeaveView(sn, taken)
			if !good || len(taken) != len(kinds) {
				t.Fatalf("%s: the window %+v does not hold %v", name, sn.Waiting, kinds)
			}
			d.Gap = gap
			v.Group.Version = ok(e.s.Apply(ctx, f, "g", d))(t)
			return v, gap
		}
		// step decides, reports the launched run and returns the report's
		// message with the view and gap
		step := func(name string, kinds map[string]storage.ActionKind, launched string) (string, storage.Snapshot, storage.ViewGap) {
			t.Helper()
			v, gap := decide(name, kinds)
			return storage.SplitWorkEvents(reportMsg(t, e, ps, launched))[0], v, gap
		}
		noRef := func(name, p string) {
			t.Helper()
			if _, isRef := storage.ParseWorkRef(p); isRef {
				t.Fatalf("%s: %q, want no reference", name, p)
			}
		}
		check := func(name, p string, v storage.Snapshot, gap storage.ViewGap, wantGap int) {
			t.Helper()
			ref, isRef := storage.ParseWorkRef(p)
			if !isRef || len(ref.Gap) != wantGap {
				t.Fatalf("%s: message %q (%+v): want a reference with %d runs", name, p, ref, wantGap)
			}
			if _, sn := storage.ParseWorkEvent(p); sn != nil {
				t.Fatalf("%s: ParseWorkEvent read the reference %q as a snapshot", name, p)
			}
			got, good := ref.View(v, gap)
			w := snapshot()
			if !good || !reflect.DeepEqual(got.Group, w.Group) || !reflect.DeepEqual(got.Waiting, w.Waiting) ||
				got.WaitingTotal != w.WaitingTotal || got.WaitingOldest != w.WaitingOldest || len(got.Active) != 0 {
				t.Fatalf("%s: by reference (%v):\n%+v\nSnapshotBatch reads:\n%+v", name, good, got, w)
			}
		}

		// oldest r0 r1, newest r6 r7: r7 launched, r5 shifts into the newest part
		p, v, gap := step("newest", map[string]storage.ActionKind{"r7": storage.ActionLaunch}, "r7")
		if gap.Oldest != 0 || gap.Newest != 1 {
			t.Fatalf("newest: gap %+v, want 0 oldest and 1 newest", gap)
		}
		check("newest", p, v, gap, 1)

		// the recorded gap does not parse (a corrupt dv): the snapshot
		// oldest r0 r1, newest r5 r6: r0 launched
		decide("corrupt", map[string]storage.ActionKind{"r0": storage.ActionLaunch})
		dv := ok(e.c.HGet(ctx, keyspace.Of(e.s).Group("g"), "dv").Result())(t)
		mustNil(t, e.c.HSet(ctx, keyspace.Of(e.s).Group("g"), "dv", strings.SplitN(dv, ",", 2)[0]+",x").Err())
		p = storage.SplitWorkEvents(reportMsg(t, e, ps, "r0"))[0]
		noRef("a gap that does not parse", p)
		if _, sn := storage.ParseWorkEvent(p); sn == nil {
			t.Fatalf("a gap that does not parse: %q, want the snapshot", p)
		}

		// a run of the gap not indexed: no reference, the snapshot (or the name)
		// oldest r1 r2, newest r5 r6: r1 launched, r3 would shift in
		mustNil(t, e.c.HDel(ctx, keyspace.Of(e.s).WaitInfo("g"), "r3").Err())
		p, _, _ = step("unindexed", map[string]storage.ActionKind{"r1": storage.ActionLaunch}, "r1")
		noRef("a gap run not indexed", p)

		// oldest r2 r3 (r3 read from its hash), newest r5 r6, 5 waiting:
		// r2 launched and r6 discarded; the 3 left fit the window whole
		// (r4, from both ends of the gap, once)
		p, v, gap = step("whole", map[string]storage.ActionKind{"r2": storage.ActionLaunch, "r6": storage.ActionDiscard}, "r2")
		if gap.Oldest != 1 || gap.Newest != 1 {
			t.Fatalf("whole: gap %+v, want 1 oldest and 1 newest", gap)
		}
		check("whole", p, v, gap, 1)
		if w := snapshot(); w.Truncated() || len(w.Waiting) != 3 {
			t.Fatalf("whole: %+v, want the 3 runs left, whole", w)
		}
	})
}

// TestStore_PollAssigned_detail: a worker's pickup of a run placed by the
// apply (PollAssigned, and Heartbeat for the tokens it has not started)
// reads what it starts the run with: id, group, state, the assignment,
// payload, duration, attempt, max attempts, timeout, as GetRun has them.
func TestStore_PollAssigned_detail(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1", Payload: "the payload", Duration: 1500 * time.Millisecond,
			Timeout: 7 * time.Second, Retry: storage.Retry{MaxAttempts: 3}}))(t)
		launch(t, e, f, "g", "r1")
		full := ok(e.s.GetRun(ctx, "r1"))(t)
		if full.State != storage.StateRunning || len(full.Assignments) != 1 {
			t.Fatalf("r1 after the apply: %+v, want RUNNING on one slot", full)
		}
		a := full.Assignments[0]
		check := func(name string, d *storage.Run) {
			t.Helper()
			if d == nil || d.ID != "r1" || d.Group != "g" || d.State != storage.StateRunning || d.Payload != "the payload" ||
				d.Duration != 1500*time.Millisecond || d.Attempt != 1 || d.MaxAttempts != 3 || d.Timeout != 7*time.Second ||
				len(d.Assignments) != 1 || d.Assignments[0] != a {
				t.Fatalf("%s: Detail %+v, want r1's pickup fields as GetRun reads them (%+v)", name, d, full)
			}
		}
		st := ok(e.s.PollAssigned(ctx, "wA", []storage.SlotEvent{{Worker: "wA", Slot: a.Slot, Run: "r1"}}))(t)
		if len(st) != 1 {
			t.Fatalf("PollAssigned: %+v, want r1's slot", st)
		}
		check("PollAssigned", st[0].Detail)
		hb := ok(e.s.Heartbeat(ctx, "wA", time.Minute, func(tok string) bool { return tok == a.Token }))(t)
		n := 0
		for _, s := range hb {
			if s.Run == "r1" {
				check("Heartbeat", s.Detail)
				n++
			}
		}
		if n != 1 {
			t.Fatalf("Heartbeat: %+v, want r1's slot once", hb)
		}
	})
}
