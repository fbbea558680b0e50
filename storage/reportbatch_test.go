package storage_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
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
// report's, the group's next snapshot at its final version, after the
// policy generation the snapshots were made at (one GET; WorkEventGen). On its own
// redis-server: the counts are the server's.
func TestStore_ReportBatch_oneCall(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv.URL())
	reps := reportSetup(t, e)
	v0 := map[string]int64{}
	for _, g := range []string{"g1", "g2", "g3"} {
		v0[g] = ok(e.s.GetGroup(ctx, g))(t).Version
	}
	work := e.s.Subscribe(ctx, keyspace.Of(e.s).WorkEvents())
	defer work.Close()
	runEv := e.s.Subscribe(ctx, keyspace.Of(e.s).RunEvents())
	defer runEv.Close()
	if _, err := work.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := runEv.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	mustNil(t, e.c.Set(ctx, keyspace.Of(e.s).PolicyGen(), 7, 0).Err()) // as if 7 policy versions had been pushed
	mustNil(t, e.c.ConfigResetStat(ctx).Err())
	for i, err := range e.s.ReportBatch(ctx, "wA", reps) {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	calls := innerCalls(t, e)
	for cmd, want := range map[string]int{"evalsha": 1, "time": 1, "sismember": 1, "sadd": 1, "srem": 1, "publish": 2,
		"zadd": 6 + 2, "hincrby": 6, "get": 1} {
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
	if gen, has := storage.WorkEventGen(m.Payload); !has || gen != 7 {
		t.Errorf("work message %q: policy generation %d %v, want 7 (the handed-back groups' generation, one GET)", m.Payload, gen, has)
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
		rk := keyspace.Of(e.s).Run("g2-r0")
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
		if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Free()).Result())(t); n != 2 {
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

// TestStore_Report_quietGroup: a report that leaves its group with no
// active run, none waiting and no wake pending does not mark it dirty (a
// decision could launch, discard or stop nothing: no settle round); its
// version is still bumped (a decision in flight is stale) and its work
// message is its name (the slot manager and retention wake). A run still
// waiting, another still active or a pending wake keeps the group dirty as
// before; a retried attempt parks and its timer dirties the group when due.
func TestStore_Report_quietGroup(t *testing.T) {
	cases := []struct {
		name      string
		runs      int  // submitted; the first two launched (max_active 2)
		wake      bool // the launching decision asks for a wake
		retry     bool // the first run reports FAILED with an attempt left
		report    int  // runs reported (in order)
		wantDirty bool
	}{
		{name: "last run", runs: 1, report: 1},
		{name: "both active runs", runs: 2, report: 2},
		{name: "one still active", runs: 2, report: 1, wantDirty: true},
		{name: "one still waiting", runs: 3, report: 2, wantDirty: true},
		{name: "wake pending", runs: 1, wake: true, report: 1, wantDirty: true},
		{name: "retry parked", runs: 1, retry: true, report: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backends(t, func(t *testing.T, e *env) {
				f := e.lead(t, "L#1#a")
				mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
				ok(e.s.SetGroup(ctx, "g", "wait", 2))(t)
				var ids []string
				for i := range tc.runs {
					id := fmt.Sprintf("r%d", i)
					req := storage.SubmitRequest{Group: "g", ID: id}
					if tc.retry {
						req.Retry = storage.Retry{MaxAttempts: 2}
					}
					ok(e.s.Submit(ctx, req))(t)
					ids = append(ids, id)
				}
				v := ok(e.s.GetGroup(ctx, "g"))(t).Version
				d := storage.Decision{Version: v, ClaimID: "c1"}
				for _, id := range ids[:min(2, len(ids))] {
					d.Actions = append(d.Actions, storage.Action{Kind: storage.ActionLaunch, Run: id})
				}
				if tc.wake {
					d.WakeAt = time.Now().Add(time.Hour).UnixMilli()
				}
				mustNil(t, e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: d}})[0].Err)
				if n := e.c.SCard(ctx, keyspace.Of(e.s).Dirty()).Val(); n != 0 {
					t.Fatalf("dirty after the apply: %d", n)
				}
				work := e.s.Subscribe(ctx, keyspace.Of(e.s).WorkEvents())
				defer work.Close()
				if _, err := work.Receive(ctx); err != nil {
					t.Fatal(err)
				}
				var reps []storage.ReportReq
				for i, id := range ids[:tc.report] {
					r := ok(e.s.GetRun(ctx, id))(t)
					out := storage.StateSucceeded
					if tc.retry && i == 0 {
						out = storage.StateFailed
					}
					reps = append(reps, storage.ReportReq{Group: "g", Run: id, Token: r.Assignments[0].Token, Outcome: out})
				}
				for i, err := range e.s.ReportBatch(ctx, "wA", reps) {
					if err != nil {
						t.Fatalf("report %d: %v", i, err)
					}
				}
				g := ok(e.s.GetGroup(ctx, "g"))(t)
				if g.Version != v+1+int64(tc.report) {
					t.Fatalf("version %d, want %d (the apply and each report bump it)", g.Version, v+1+int64(tc.report))
				}
				dirty := e.c.SIsMember(ctx, keyspace.Of(e.s).Dirty(), "g").Val()
				if dirty != tc.wantDirty {
					t.Fatalf("dirty = %v after the reports, want %v", dirty, tc.wantDirty)
				}
				m, err := work.ReceiveMessage(ctx)
				mustNil(t, err)
				if m.Payload == storage.TimerEvent { // (the parked retry's, first)
					m, err = work.ReceiveMessage(ctx)
					mustNil(t, err)
				}
				msgs := storage.SplitWorkEvents(m.Payload)
				if len(msgs) != 1 {
					t.Fatalf("work messages %q, want one", msgs)
				}
				// a quiet group's message says there is nothing to decide (and
				// reads as its name); any other is a group to decide
				if name, sn := storage.ParseWorkEvent(msgs[0]); storage.QuietWorkEvent(msgs[0]) != !tc.wantDirty || name != "g" ||
					(!tc.wantDirty && sn != nil) {
					t.Fatalf("dirty %v: message %q (quiet %v, name %q), want quiet only when not dirty", tc.wantDirty, msgs[0],
						storage.QuietWorkEvent(msgs[0]), name)
				}
				if free := ok(e.s.FreeSlots(ctx))(t); free != int64(2-min(2, tc.runs)+tc.report) {
					t.Fatalf("free slots %d after the reports", free)
				}
				if tc.retry {
					r := ok(e.s.GetRun(ctx, "r0"))(t)
					if r.State != storage.StateWaiting || r.Attempt != 2 {
						t.Fatalf("the retried run is %s attempt %d", r.State, r.Attempt)
					}
					if sc := e.c.ZScore(ctx, keyspace.Of(e.s).Timers(), "g"); sc.Err() != nil {
						t.Fatalf("no timer for the parked retry: %v", sc.Err())
					}
				}
			})
		})
	}
}
