package storage_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// waitingRuns leads, registers worker wA with n slots and submits n runs
// to group g (wait, max_active n): their ids, in order.
func waitingRuns(t *testing.T, e *env, g string, n int) (storage.Fence, []string) {
	t.Helper()
	f := e.lead(t, "L#1#a")
	mustNil(t, e.s.RegisterWorker(ctx, "wA", n, time.Hour))
	ok(e.s.SetGroup(ctx, g, "wait", n))(t)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("r%03d", i)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: id}))(t)
		ids = append(ids, id)
	}
	return f, ids
}

// reportSetup: groups g1..g3 (wait, max_active 2), two RUNNING runs each
// on worker wA (six slots) and one more waiting run each; returns the
// reports of the six runs, group by group.
func reportSetup(t *testing.T, e *env) []storage.ReportReq {
	t.Helper()
	f := e.lead(t, "L#1#a")
	mustNil(t, e.s.RegisterWorker(ctx, "wA", 6, time.Minute))
	var reps []storage.ReportReq
	for i := 1; i <= 3; i++ {
		g := fmt.Sprintf("g%d", i)
		ok(e.s.SetGroup(ctx, g, "wait", 2))(t)
		for j := range 3 {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: fmt.Sprintf("%s-r%d", g, j)}))(t)
		}
		launch(t, e, f, g, g+"-r0", g+"-r1")
		for j := range 2 {
			id := fmt.Sprintf("%s-r%d", g, j)
			r := ok(e.s.GetRun(ctx, id))(t)
			if r.State != storage.StateRunning {
				t.Fatalf("%s is %s, want RUNNING", id, r.State)
			}
			reps = append(reps, storage.ReportReq{Group: g, Run: id, Token: r.Assignments[0].Token, Outcome: storage.StateSucceeded})
		}
	}
	return reps
}

// TestStore_ReportBatch_oneCall: a worker's reports go in one report call
// (up to 32 a call): its clock, its worker's draining check, the freed
// slots (one ZADD), dirty (one SADD), retire (one ZADD NX), restore (one
// SREM), the run events and the groups' work messages (one PUBLISH each)
// are read and written once, whatever the number of reports; each run and
// group ends as run-by-run reports leave them. The work message carries
// one message a group, 0x1c-separated (storage.SplitWorkEvents): its last
// report's, the group's next snapshot at its final version. On its own
// redis-server: the counts are the server's.
func TestStore_ReportBatch_oneCall(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv.URL())
	reps := reportSetup(t, e)
	v0 := map[string]int64{}
	for _, g := range []string{"g1", "g2", "g3"} {
		v0[g] = ok(e.s.GetGroup(ctx, g))(t).Version
	}
	work := e.s.Subscribe(ctx, e.s.Keys().WorkEvents())
	defer work.Close()
	runEv := e.s.Subscribe(ctx, e.s.Keys().RunEvents())
	defer runEv.Close()
	if _, err := work.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := runEv.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	mustNil(t, e.c.ConfigResetStat(ctx).Err())
	for i, err := range e.s.ReportBatch(ctx, "wA", reps) {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	calls := innerCalls(t, e)
	for cmd, want := range map[string]int{"evalsha": 1, "time": 1, "sismember": 1, "sadd": 1, "srem": 1, "publish": 2,
		"zadd": 6 + 2, "hincrby": 6} {
		if calls[cmd] != want {
			t.Errorf("one call of 6 reports over 3 groups: %d %s, want %d (all: %v)", calls[cmd], strings.ToUpper(cmd), want, calls)
		}
	}
	for _, r := range reps {
		if got := ok(e.s.GetRun(ctx, r.Run))(t); got.State != storage.StateSucceeded {
			t.Errorf("%s is %s, want SUCCEEDED", r.Run, got.State)
		}
	}
	if sv := ok(e.s.Slots(ctx))(t); sv.Free != 6 {
		t.Errorf("free slots %d, want 6", sv.Free)
	}
	if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 3 {
		t.Errorf("dirty %v, want g1 g2 g3", d)
	}
	m, err := runEv.ReceiveMessage(ctx)
	mustNil(t, err)
	if evs := storage.ParseRunEvents(m.Payload); len(evs) != 6 {
		t.Errorf("run events %q: %d, want 6 in one message", m.Payload, len(evs))
	}
	m, err = work.ReceiveMessage(ctx)
	mustNil(t, err)
	msgs := storage.SplitWorkEvents(m.Payload)
	if len(msgs) != 3 {
		t.Fatalf("work message %q: %d group messages, want 3", m.Payload, len(msgs))
	}
	for i, msg := range msgs {
		g, sn := storage.ParseWorkEvent(msg)
		want := fmt.Sprintf("g%d", i+1)
		if g != want || sn == nil {
			t.Fatalf("message %d: %q %v, want %s's snapshot", i, g, sn, want)
		}
		// both reports bumped it: the snapshot is its last report's
		if sn.Group.Version != v0[g]+2 || len(sn.Active) != 0 || len(sn.Waiting) != 1 || sn.Waiting[0].ID != g+"-r2" {
			t.Errorf("%s: version %d (want %d), %d active, waiting %+v, want only %s-r2",
				g, sn.Group.Version, v0[g]+2, len(sn.Active), sn.Waiting, g)
		}
	}
	// a replay of the whole call writes nothing and says so per run
	mustNil(t, e.c.ConfigResetStat(ctx).Err())
	for i, err := range e.s.ReportBatch(ctx, "wA", reps) {
		if err != nil {
			t.Fatalf("replayed report %d: %v", i, err)
		}
	}
	if calls := innerCalls(t, e); calls["hset"] != 0 || calls["hincrby"] != 0 || calls["zadd"] != 0 {
		t.Errorf("a replayed call wrote: %v", calls)
	}
}

// TestStore_ReportBatch_failedReportKeepsTheWrites: a command that fails in
// the middle of a report call (a run key holding a string) fails the
// call, and the reports written before it keep their shared writes (their
// slots back in free, their groups dirty: collected for one ZADD and one
// SADD at the end, written even then); the reports after it are not
// written, and the call sent again (the key mended) replays the first
// and writes the rest.
func TestStore_ReportBatch_failedReportKeepsTheWrites(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		reps := reportSetup(t, e)
		// g2-r0's run key replaced by a string: its first read fails
		rk := e.s.Keys().Run("g2-r0")
		saved := ok(e.c.HGetAll(ctx, rk).Result())(t)
		mustNil(t, e.c.Del(ctx, rk).Err())
		mustNil(t, e.c.Set(ctx, rk, "not a hash", 0).Err())
		for i, err := range e.s.ReportBatch(ctx, "wA", reps) {
			if err == nil {
				t.Fatalf("report %d: no error from a call that failed at g2-r0", i)
			}
		}
		for _, id := range []string{"g1-r0", "g1-r1"} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateSucceeded {
				t.Errorf("%s is %s, want SUCCEEDED (written before the failure)", id, r.State)
			}
		}
		for _, id := range []string{"g2-r1", "g3-r0", "g3-r1"} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateRunning {
				t.Errorf("%s is %s, want RUNNING (after the failure: not written)", id, r.State)
			}
		}
		if n := ok(e.c.ZCard(ctx, e.s.Keys().Free()).Result())(t); n != 2 {
			t.Errorf("free slots %d, want 2 (g1's two)", n)
		}
		if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 1 || d[0] != "g1" {
			t.Errorf("dirty %v, want g1", d)
		}
		// mended: the same call replays g1's and writes the others
		mustNil(t, e.c.Del(ctx, rk).Err())
		mustNil(t, e.c.HSet(ctx, rk, saved).Err())
		for i, err := range e.s.ReportBatch(ctx, "wA", reps) {
			if err != nil {
				t.Fatalf("report %d sent again: %v", i, err)
			}
		}
		if sv := ok(e.s.Slots(ctx))(t); sv.Free != 6 {
			t.Errorf("free slots %d after the retry, want 6", sv.Free)
		}
		for _, r := range reps {
			if got := ok(e.s.GetRun(ctx, r.Run))(t); got.State != storage.StateSucceeded {
				t.Errorf("%s is %s after the retry, want SUCCEEDED", r.Run, got.State)
			}
		}
	})
}

// TestStore_ReportBatch_manyCalls: more reports than one call carries go
// as several calls of one pipeline, every report's error in its place.
func TestStore_ReportBatch_manyCalls(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f, ids := waitingRuns(t, e, "g", 40)
		launch(t, e, f, "g", ids...)
		v0 := ok(e.s.GetGroup(ctx, "g"))(t).Version
		var reps []storage.ReportReq
		for i, id := range ids {
			r := ok(e.s.GetRun(ctx, id))(t)
			tok := r.Assignments[0].Token
			if i == 35 {
				tok = "bogus"
			}
			reps = append(reps, storage.ReportReq{Group: "g", Run: id, Token: tok, Outcome: storage.StateSucceeded})
		}
		cc := &cmdCounter{only: "evalsha"}
		e.c.AddHook(cc)
		errs := e.s.ReportBatch(ctx, "wA", reps)
		if n := cc.n.Load(); n != 2 {
			t.Errorf("40 reports took %d calls, want 2 (32 a call)", n)
		}
		for i, err := range errs {
			if (i == 35) != (err != nil) {
				t.Errorf("report %d: %v", i, err)
			}
		}
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Version != v0+39 || g.Active != 1 {
			t.Errorf("group after 39 reports: version %d, %d active, want %d and 1 (r35's report refused)", g.Version, g.Active, v0+39)
		}
	})
}
