package storage_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// innerCalls reads INFO commandstats: calls per command, the commands
// scripts run included (a go-redis hook sees only the EVALSHA).
func innerCalls(t *testing.T, e *env) map[string]int {
	t.Helper()
	info, err := e.c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// TestStore_SubmitBatch_perGroupOnce: a submit call reads a group's run
// defaults once and bumps its version once (by its due runs), takes its
// seqs from one INCRBY and marks its groups dirty in one SADD, whatever the
// number of runs; what it writes is what run-by-run submits write
// (versions, seqs in order, dirty, the waiting zsets). On its own
// redis-server: the counts are the server's.
func TestStore_SubmitBatch_perGroupOnce(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv.URL())
	ok(e.s.SetGroup(ctx, "h", "wait", 1))(t)
	var reqs []storage.SubmitRequest
	for i := range 40 {
		g := "g"
		if i%4 == 3 {
			g = "h"
		}
		reqs = append(reqs, storage.SubmitRequest{Group: g, ID: fmt.Sprintf("r%02d", i)})
	}
	hv := ok(e.s.GetGroup(ctx, "h"))(t).Version
	mustNil(t, e.c.ConfigResetStat(ctx).Err())
	res := e.s.SubmitBatch(ctx, reqs)
	calls := innerCalls(t, e)
	var last int64
	for i, r := range res {
		if r.Err != nil || r.Run.Seq <= last {
			t.Fatalf("run %d: %+v (seq after %d)", i, r, last)
		}
		last = r.Run.Seq
	}
	// 40 runs: one existence read each (an HGET: new runs), one defaults
	// read a group (an HMGET)
	if calls["hget"] != 40 || calls["hmget"] != 2 || calls["hincrby"] != 2 || calls["incrby"] != 1 || calls["evalsha"] != 1 {
		t.Errorf("one call of 40 runs over 2 groups: %d HGET (want 40), %d HMGET (2), %d HINCRBY (2), %d INCRBY (1), %d EVALSHA (1)",
			calls["hget"], calls["hmget"], calls["hincrby"], calls["incrby"], calls["evalsha"])
	}
	// ZADD: each run into its group's waiting zset and into the runs zset
	if calls["zadd"] != 80 {
		t.Errorf("%d ZADD, want 80 (each run into waiting and into runs)", calls["zadd"])
	}
	if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Runs()).Result())(t); n != 40 {
		t.Errorf("%d runs indexed, want 40", n)
	}
	// SADD: the new group g into the groups set, then dirty once
	if calls["sadd"] != 2 {
		t.Errorf("%d SADD, want 2 (g into the groups set, the call's groups into dirty)", calls["sadd"])
	}
	if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Version != 30 || g.Waiting != 30 {
		t.Errorf("group g: version %d, %d waiting, want 30 and 30", g.Version, g.Waiting)
	}
	if h := ok(e.s.GetGroup(ctx, "h"))(t); h.Version != hv+10 || h.Waiting != 10 {
		t.Errorf("group h: version %d, %d waiting, want %d and 10", h.Version, h.Waiting, hv+10)
	}
	if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 2 {
		t.Errorf("dirty %v, want g and h", d)
	}
}

// TestStore_ApplyBatch_oneSREM: an apply call of many groups' decisions
// takes them out of dirty in one SREM (settles and decisions alike), and
// each applied group is out of dirty after it; its launches' slots are
// read in one window, each launch on its own slot.
func TestStore_ApplyBatch_oneSREM(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv.URL())
	f := e.lead(t, "L#1#a")
	mustNil(t, e.s.RegisterWorker(ctx, "wA", 8, time.Hour))
	var ds []storage.GroupDecision
	for i := range 6 {
		g := fmt.Sprintf("g%d", i)
		r := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g}))(t)
		d := storage.Decision{Version: ok(e.s.GetGroup(ctx, g))(t).Version, ClaimID: "c" + g}
		if i%2 == 0 { // half launch, half settle
			d.Actions = []storage.Action{{Kind: storage.ActionLaunch, Run: r.ID}}
		}
		ds = append(ds, storage.GroupDecision{Group: g, Decision: d})
	}
	mustNil(t, e.c.ConfigResetStat(ctx).Err())
	for i, r := range e.s.ApplyBatch(ctx, f, ds) {
		if r.Err != nil {
			t.Fatalf("group %d: %v", i, r.Err)
		}
	}
	calls := innerCalls(t, e)
	if calls["srem"] != 1 || calls["evalsha"] != 1 {
		t.Errorf("one apply call of 6 groups: %d SREM, %d EVALSHA, want 1 and 1", calls["srem"], calls["evalsha"])
	}
	// the 3 launches placed: their slots read in one window (one ZRANGE)
	if calls["zrange"] != 1 {
		t.Errorf("3 launches placed: %d ZRANGE, want 1 (all: %v)", calls["zrange"], calls)
	}
	// whether a LAUNCHED run waits for slots: read once a call, not a launch
	if calls["zcard"] != 1 {
		t.Errorf("3 launches placed: %d ZCARD, want 1 (the launched queue's, once a call; all: %v)", calls["zcard"], calls)
	}
	held := map[string]bool{}
	for _, d := range ds {
		for _, a := range d.Decision.Actions {
			r := ok(e.s.GetRun(ctx, a.Run))(t)
			if r.State != storage.StateRunning || len(r.Assignments) != 1 {
				t.Fatalf("%s: %s, %d assignments, want RUNNING on one slot", a.Run, r.State, len(r.Assignments))
			}
			as := r.Assignments[0]
			f := fmt.Sprintf("%s#%d", as.Worker, as.Slot)
			v := ok(e.c.HGet(ctx, keyspace.Of(e.s).Slots(), f).Result())(t)
			if held[f] || v != fmt.Sprintf("%s#%s#0", a.Run, as.Token) {
				t.Errorf("slot %s holds %q (taken twice: %v), want %s's assignment", f, v, held[f], a.Run)
			}
			held[f] = true
		}
	}
	if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Free()).Result())(t); n != 8-3 {
		t.Errorf("%d slots free, want 5", n)
	}
	if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 0 {
		t.Errorf("dirty after the apply: %v", d)
	}
}

// TestStore_SubmitBatch_failedRunKeepsTheBumps: a command that fails in
// the middle of a submit call (a run key holding a string) fails the call,
// and the runs written before it still got their group's version bump and
// dirty mark (collected for one HINCRBY and one SADD at the end: written
// even then), so no decision made before them passes the version check.
func TestStore_SubmitBatch_failedRunKeepsTheBumps(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		v0 := ok(e.s.GetGroup(ctx, "g"))(t).Version
		mustNil(t, e.c.Set(ctx, keyspace.Of(e.s).Run("r2"), "not a hash", 0).Err())
		res := e.s.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "g", ID: "r0"}, {Group: "g", ID: "r1"},
			{Group: "g", ID: "r2"}, {Group: "g", ID: "r3"}})
		for i, r := range res {
			if r.Err == nil {
				t.Fatalf("run %d: no error from a call that failed at r2", i)
			}
		}
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if g.Version != v0+2 || g.Waiting != 2 {
			t.Errorf("after the failed call: version %d, %d waiting, want %d and 2 (r0, r1 written and counted)",
				g.Version, g.Waiting, v0+2)
		}
		if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 1 || d[0] != "g" {
			t.Errorf("dirty %v, want g", d)
		}
	})
}

// TestStore_AllocateBatch_deferredRemovals: an allocate call takes its
// slots out of free, and its runs out of launched and the launched index,
// in one ZREM, ZREM and HDEL at its end; its free-slot cursor reads past
// the slots it took (still in free until then) window after window: 100
// runs of one slot on 100 free slots (windows of 64) all get a slot, each
// its own, and free is empty after it.
func TestStore_AllocateBatch_deferredRemovals(t *testing.T) {
	srv := redistest.Start(t)
	e := newEnv(t, "redis", srv.URL())
	f, ids := waitingRuns(t, e, "g", 100)
	v := ok(e.s.GetGroup(ctx, "g"))(t).Version
	d := storage.Decision{Version: v, ClaimID: "c", NoPlace: true}
	for _, id := range ids {
		d.Actions = append(d.Actions, storage.Action{Kind: storage.ActionLaunch, Run: id})
	}
	mustNil(t, e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: d}})[0].Err)
	mustNil(t, e.c.ConfigResetStat(ctx).Err())
	res := ok(e.s.AllocateBatch(ctx, f, ids))(t)
	calls := innerCalls(t, e)
	used := map[int]bool{}
	for _, r := range res {
		if r.Outcome != storage.AllocAllocated || len(r.Assignments) != 1 || used[r.Assignments[0].Slot] {
			t.Fatalf("%s: %+v (slots used %d)", r.Run, r, len(used))
		}
		used[r.Assignments[0].Slot] = true
	}
	if len(res) != 100 || calls["zrem"] != 2 || calls["hdel"] != 1 || calls["evalsha"] != 1 {
		t.Errorf("one call of %d runs: %d ZREM, %d HDEL, %d EVALSHA, want 2, 1 and 1", len(res), calls["zrem"], calls["hdel"], calls["evalsha"])
	}
	// each free slot read and checked once: two windows, one HGET a slot
	if calls["zrange"] != 2 || calls["hget"] != 100 {
		t.Errorf("the cursor read %d windows and checked %d slots, want 2 and 100", calls["zrange"], calls["hget"])
	}
	if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Free()).Result())(t); n != 0 {
		t.Errorf("%d slots left in free, want 0", n)
	}
	if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Launched()).Result())(t); n != 0 {
		t.Errorf("%d runs left in launched, want 0", n)
	}
}

// TestStore_ApplyBatch_failedGroupLeavesTheOthers: a group whose command
// fails at run time (its decisions list key holds a string) gets that
// error; the call's other groups are applied all the same (versions,
// dirty, their runs RUNNING) and the call's shared writes are made (the
// slots it placed on out of free, one slot-events message for the runs,
// the failed group's run placed before its failure included).
func TestStore_ApplyBatch_failedGroupLeavesTheOthers(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 8, time.Hour))
		var ds []storage.GroupDecision
		for _, g := range []string{"g1", "g2", "g3"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: g + "-r"}))(t)
			ds = append(ds, storage.GroupDecision{Group: g, Decision: storage.Decision{
				Version: ok(e.s.GetGroup(ctx, g))(t).Version, ClaimID: "c-" + g,
				Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: g + "-r"}}}})
		}
		mustNil(t, e.c.Set(ctx, keyspace.Of(e.s).Decisions("g2"), "not a list", 0).Err())
		slots := e.s.Subscribe(ctx, keyspace.Of(e.s).SlotEvents("wA"))
		defer slots.Close()
		if _, err := slots.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		res := e.s.ApplyBatch(ctx, f, ds)
		if res[0].Err != nil || res[2].Err != nil || res[1].Err == nil {
			t.Fatalf("results %+v, want g2's error only", res)
		}
		for _, g := range []string{"g1", "g3"} {
			if r := ok(e.s.GetRun(ctx, g+"-r"))(t); r.State != storage.StateRunning {
				t.Errorf("%s-r is %s, want RUNNING", g, r.State)
			}
		}
		if d := ok(e.s.DirtyGroups(ctx, 0))(t); len(d) != 1 || d[0] != "g2" {
			t.Errorf("dirty %v, want g2 only", d)
		}
		m, err := slots.ReceiveMessage(ctx)
		mustNil(t, err)
		// g2's run was placed before its group's failure: what the call
		// wrote stays, and is announced with the rest
		if !strings.Contains(m.Payload, "#g1-r") || !strings.Contains(m.Payload, "#g2-r") || !strings.Contains(m.Payload, "#g3-r") {
			t.Errorf("slot events %q, want g1-r's, g2-r's and g3-r's", m.Payload)
		}
		if r := ok(e.s.GetRun(ctx, "g2-r"))(t); r.State != storage.StateRunning {
			t.Errorf("g2-r is %s, want RUNNING (written before the failure)", r.State)
		}
		// g2's run holds a slot (written before its failure): two slots
		// for g1 and g3 and g2's out of free, the rest free
		if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Free()).Result())(t); n != 5 {
			t.Errorf("%d slots free, want 5", n)
		}
	})
}

// TestStore_ApplyBatch_failedActionAnnouncesWhatItWrote: a group whose
// command fails part-way through its actions (its second run's key holds
// a string) gets that error, and the first run it had placed is announced
// (slot events, run events): the worker need not wait for a heartbeat to
// find a run the apply left RUNNING on its slot.
func TestStore_ApplyBatch_failedActionAnnouncesWhatItWrote(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 8, time.Hour))
		ok(e.s.SetGroup(ctx, "g", "wait", 2))(t)
		for _, id := range []string{"r1", "r2"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
		}
		mustNil(t, e.c.Set(ctx, keyspace.Of(e.s).Run("r2"), "not a hash", 0).Err())
		slots := e.s.Subscribe(ctx, keyspace.Of(e.s).SlotEvents("wA"), keyspace.Of(e.s).RunEvents())
		defer slots.Close()
		for range 2 {
			if _, err := slots.Receive(ctx); err != nil {
				t.Fatal(err)
			}
		}
		res := e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: storage.Decision{
			Version: ok(e.s.GetGroup(ctx, "g"))(t).Version, ClaimID: "c1",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r1"}, {Kind: storage.ActionLaunch, Run: "r2"}}}}})
		if len(res) != 1 || res[0].Err == nil {
			t.Fatalf("results %+v, want g's error", res)
		}
		if r := ok(e.s.GetRun(ctx, "r1"))(t); r.State != storage.StateRunning {
			t.Fatalf("r1 is %s, want RUNNING (written before the failure)", r.State)
		}
		got := messages(t, slots, 2) // a slot-events and a run-events message
		if p := got[keyspace.Of(e.s).SlotEvents("wA")]; !strings.Contains(p, "#r1") || strings.Contains(p, "#r2") {
			t.Errorf("slot events %q, want r1's only", p)
		}
		if p := got[keyspace.Of(e.s).RunEvents()]; !strings.Contains(p, "RUNNING#g#r1") {
			t.Errorf("run events %q, want r1 RUNNING", p)
		}
	})
}
