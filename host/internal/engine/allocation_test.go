package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/rediscount"
	"github.com/wasmsched/wasmsched/storage"
)

// launchRuns submits each run to its own wait group and launches it
// without placing it (the slot manager's work).
func (e *renv) launchRuns(reqs ...storage.SubmitRequest) []string {
	e.t.Helper()
	var ids []string
	for _, r := range reqs {
		r.Group = "g-" + r.ID
		e.group(r.Group, "wait", 1)
		if _, err := e.st.Submit(context.Background(), r); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	e.rt.coord.noPlace = true
	defer func() { e.rt.coord.noPlace = false }()
	for i := 0; i < 10 && e.pass(); i++ {
	}
	return ids
}

func tenantRun(id, tenant string, prio int) storage.SubmitRequest {
	return storage.SubmitRequest{ID: id, Slots: 1, Priority: prio, Labels: []abi.Label{{Key: "tenant", Value: tenant}}}
}

func (e *renv) setAllocation(a storage.AllocationSettings) {
	e.t.Helper()
	if err := e.st.SetAllocation(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
	// what every host's hot-swap subscription does on the change's message
	if _, err := e.rt.set.Refresh(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// running lists which of ids are RUNNING.
func (e *renv) running(ids []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		if e.run(id).State == storage.StateRunning {
			out[id] = true
		}
	}
	return out
}

// TestSlotManager_allocationPolicy: the namespace's allocation policy
// orders the launched runs: two free slots go to the runs it puts first.
func TestSlotManager_allocationPolicy(t *testing.T) {
	runs := []storage.SubmitRequest{tenantRun("a1", "a", 0), tenantRun("a2", "a", 5), tenantRun("a3", "a", 0), tenantRun("b1", "b", 9)}
	for _, c := range []struct {
		name string
		set  storage.AllocationSettings
		want []string
	}{
		{"default-fifo", storage.AllocationSettings{}, []string{"a1", "a2"}},
		{"fifo", storage.AllocationSettings{Policy: "fifo"}, []string{"a1", "a2"}},
		{"fair", storage.AllocationSettings{Policy: "fair", FairLabel: "tenant"}, []string{"a1", "b1"}},
		{"priority-first", storage.AllocationSettings{Policy: "priority-first"}, []string{"b1", "a2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newREnv(t, Config{})
			e.worker("w1", 2, time.Hour)
			ids := e.launchRuns(runs...)
			e.setAllocation(c.set)
			if n := e.slotPass(); n != 2 {
				t.Fatalf("allocated %d, want 2", n)
			}
			got := e.running(ids)
			for _, id := range c.want {
				if !got[id] {
					t.Fatalf("running %v, want %v", got, c.want)
				}
			}
			e.checkSlots(ids...)
			if f := e.metric("wasmsched_allocations_total", "outcome", "policy_failed"); f != 0 {
				t.Fatalf("policy_failed %v", f)
			}
		})
	}
}

// keyReads counts the commands naming key as their first key.
type keyReads struct {
	key  string
	n    atomic.Int64
	last atomic.Value // []any: the args of the last such command
}

func (k *keyReads) see(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if a := c.Args(); len(a) > 1 && a[1] == k.key {
			k.n.Add(1)
			k.last.Store(a)
		}
	}
}
func (k *keyReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (k *keyReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error { k.see(c); return next(ctx, c) }
}
func (k *keyReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error { k.see(cs...); return next(ctx, cs) }
}

// TestSlotManager_builtinFifo: the built-in fifo's order is launch order,
// computed in place: a pass reads no run's allocation fields, calls no
// plugin, and places the oldest runs on the free slots with its allocate
// calls in one round trip; a pushed policy named fifo is called like any
// other (here one that reverses the order).
func TestSlotManager_builtinFifo(t *testing.T) {
	e := newREnv(t, Config{})
	var reqs []storage.SubmitRequest
	for i := range 100 {
		reqs = append(reqs, storage.SubmitRequest{ID: fmt.Sprintf("r%03d", i), Slots: 1})
	}
	ids := e.launchRuns(reqs...)
	e.worker("w1", 80, time.Hour)
	if err := e.st.Load(context.Background()); err != nil { // scripts cached: no NOSCRIPT resend below
		t.Fatal(err)
	}
	c := rediscount.New(storage.ScriptName).Hook(e.rdb)
	linfo := &keyReads{key: keyspace.Of(e.st).LaunchInfo()}
	e.rdb.AddHook(linfo)
	if n := e.slotPass(); n != 80 {
		t.Fatalf("allocated %d, want 80", n)
	}
	if counts := c.Counts(); counts["script allocate_batch"] != 2 || linfo.n.Load() != 0 {
		t.Fatalf("commands %v, %d reads of the runs' allocation fields: want 2 allocate calls (64 + 36 runs) and none",
			counts, linfo.n.Load())
	}
	if calls := e.metric("wasmsched_policy_call_seconds", "policy", "fifo"); calls != 0 {
		t.Fatalf("%v fifo plugin calls, want none", calls)
	}
	running := e.running(ids)
	for i, id := range ids {
		if running[id] != (i < 80) {
			t.Fatalf("%s running=%v: want the 80 oldest running (%d running)", id, running[id], len(running))
		}
	}
	e.checkSlots(ids...)
	// the next pass reads a window for the runs that can fit (4 x the 80
	// free slots the last pass saw: the oldest 320 and newest 320), not
	// the most a policy's snapshot may hold (500 and 500)
	queue := &keyReads{key: keyspace.Of(e.st).Launched()}
	e.rdb.AddHook(queue)
	e.slotPass()
	if a, _ := queue.last.Load().([]any); len(a) < 4 || fmt.Sprint(a[0], " ", a[2], " ", a[3]) != "zrange 0 639" {
		t.Fatalf("the queue read %v, want zrange 0 639", a)
	}

	// a pushed fifo (the hostile plugin's reverse mode) is the plugin's order
	wasm, err := os.ReadFile("../../../policies/testdata/hostile-alloc/hostile-alloc.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PushPolicy(context.Background(), storage.PushRequest{Name: "fifo", Kind: "allocation", Blob: wasm, Activate: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	e.setAllocation(storage.AllocationSettings{Params: []abi.Label{{Key: "mode", Value: "reverse"}}})
	e.worker("w2", 1, time.Hour)
	if n := e.slotPass(); n != 1 {
		t.Fatalf("allocated %d, want 1", n)
	}
	if calls := e.metric("wasmsched_policy_call_seconds", "policy", "fifo"); calls != 1 {
		t.Fatalf("%v pushed fifo calls, want 1", calls)
	}
	if r := e.running(ids); !r[ids[99]] || r[ids[80]] {
		t.Fatalf("the pushed fifo's order (newest first) was not used: %s running %v, %s running %v", ids[99], r[ids[99]], ids[80], r[ids[80]])
	}
}

// TestSlotManager_hostileAllocation: an allocation policy that loops,
// traps, exhausts its memory or lies (an unknown run, a run twice, a
// longer order than the snapshot) changes nothing it should not: every
// pass still allocates, in the order of the previous policy that decided
// well (priority-first here), no slot is given twice, and the failures
// are counted.
func TestSlotManager_hostileAllocation(t *testing.T) {
	wasm, err := os.ReadFile("../../../policies/testdata/hostile-alloc/hostile-alloc.wasm")
	if err != nil {
		t.Fatal(err)
	}
	e := newREnv(t, Config{PolicyTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	if _, err := e.st.PushPolicy(ctx, storage.PushRequest{Name: "hostile", Kind: "allocation", Blob: wasm, Activate: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	e.setAllocation(storage.AllocationSettings{Policy: "priority-first"})
	modes := []string{"loop", "trap", "bomb", "unknown", "twice", "long"}
	var all []string
	for i, mode := range modes {
		// two runs per mode: the higher priority one is the younger
		low, high := tenantRun("low-"+mode, "a", 0), tenantRun("high-"+mode, "a", 10+i)
		ids := e.launchRuns(low, high)
		all = append(all, ids...)
		e.worker("w-"+mode, 1, time.Hour)
		if i == 0 {
			// priority-first decides once, and becomes the fallback
			if n := e.slotPass(); n != 1 {
				t.Fatalf("allocated %d", n)
			}
			e.setAllocation(storage.AllocationSettings{Policy: "hostile", Params: []abi.Label{{Key: "mode", Value: mode}}})
			e.worker("w-"+mode+"-2", 1, time.Hour)
		} else {
			e.setAllocation(storage.AllocationSettings{Policy: "hostile", Params: []abi.Label{{Key: "mode", Value: mode}}})
		}
		failed := e.metric("wasmsched_allocations_total", "outcome", "policy_failed")
		n := e.slotPass()
		if n != 1 {
			t.Fatalf("%s: allocated %d, want 1", mode, n)
		}
		if got := e.metric("wasmsched_allocations_total", "outcome", "policy_failed"); got != failed+1 {
			t.Fatalf("%s: policy_failed %v -> %v", mode, failed, got)
		}
		if r := e.running([]string{high.ID}); !r[high.ID] {
			t.Fatalf("%s: %s not running: the fallback was not priority-first (%v)", mode, high.ID, e.running(all))
		}
		e.checkSlots(all...)
	}
	// a well-behaved mode of the same plugin decides again
	e.setAllocation(storage.AllocationSettings{Policy: "hostile", Params: []abi.Label{{Key: "mode", Value: "reverse"}}})
	ids := e.launchRuns(tenantRun("old", "a", 50), tenantRun("new", "a", 0))
	e.worker("w-last", 1, time.Hour)
	failed := e.metric("wasmsched_allocations_total", "outcome", "policy_failed")
	if n := e.slotPass(); n < 1 {
		t.Fatalf("allocated %d", n)
	}
	if !e.running(ids)["new"] {
		t.Fatalf("reverse order not used: %v", e.running(ids))
	}
	if got := e.metric("wasmsched_allocations_total", "outcome", "policy_failed"); got != failed {
		t.Fatalf("policy_failed %v -> %v", failed, got)
	}
}

// TestSlotManager_fullNoWork: while every slot is taken, the coordinator's
// wakes (launches queued) cost the slot manager no Redis command and no
// policy call; a work event (a slot freed) makes it pass again.
func TestSlotManager_fullNoWork(t *testing.T) {
	e := newREnv(t, Config{SlotInterval: time.Hour, PollInterval: time.Hour})
	e.worker("w1", 1, time.Hour)
	ids := e.launchRuns(tenantRun("r1", "a", 0), tenantRun("r2", "a", 0))
	c := rediscount.New(storage.ScriptName).Hook(e.rdb)
	stop := e.runTask(e.rt.slots.Run)
	waitUntil(t, func() bool { return e.run("r1").State == storage.StateRunning })
	time.Sleep(100 * time.Millisecond) // the pass after the allocation: finds no free slot
	c.Reset()
	for range 20 {
		wakeUp(e.rt.slots.wake) // what an apply that queued launches does
		time.Sleep(5 * time.Millisecond)
	}
	if n := c.Total(); n != 0 {
		t.Fatalf("%d commands for 20 wakes with every slot taken: %v", n, c.Counts())
	}
	e.finish("r1")
	e.rt.slots.freed.Add(1) // the work event of the report
	wakeUp(e.rt.slots.wake)
	waitUntil(t, func() bool { return e.run("r2").State == storage.StateRunning })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e.checkSlots(ids...)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 500 {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pushAllocation pushes the allocation plugin at path (from
// policies/testdata) as policy name and makes it the namespace's, with
// params.
func (e *renv) pushAllocation(name, path string, params ...abi.Label) {
	e.t.Helper()
	wasm, err := os.ReadFile("../../../policies/testdata/" + path)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.PushPolicy(context.Background(), storage.PushRequest{Name: name, Kind: "allocation", Blob: wasm, Activate: true, Who: "test"}); err != nil {
		e.t.Fatal(err)
	}
	e.setAllocation(storage.AllocationSettings{Policy: name, Params: params})
}

// pushHostileAlloc pushes policies/testdata/hostile-alloc as the
// namespace's allocation policy "hostile" with mode.
func (e *renv) pushHostileAlloc(mode string) {
	e.t.Helper()
	e.pushAllocation("hostile", "hostile-alloc/hostile-alloc.wasm", abi.Label{Key: "mode", Value: mode})
}

// TestSlotManager_idleOrder: an allocation policy whose order places
// nothing on every pass (empty) while 2 slots are free and 4 launched runs
// fit them holds them MaxIdleAllocationPasses passes, no more: then the
// pass is a policy failure (counted, logged with the policy's name, toward
// auto-rollback) and the runs get the slots in launch order.
func TestSlotManager_idleOrder(t *testing.T) {
	e := newREnv(t, Config{})
	e.rt.set.rollbackAfter, e.rt.set.who = 3, "host test"
	e.pushHostileAlloc("empty")
	ids := e.launchRuns(tenantRun("r1", "a", 0), tenantRun("r2", "a", 0), tenantRun("r3", "b", 0), tenantRun("r4", "b", 0))
	e.worker("w1", 1, time.Hour)
	e.worker("w2", 1, time.Hour)
	failed := func() float64 { return e.metric("wasmsched_allocations_total", "outcome", "policy_failed") }
	for i := range MaxIdleAllocationPasses {
		if n := e.slotPass(); n != 0 {
			t.Fatalf("idle pass %d placed %d runs", i+1, n)
		}
		if f := failed(); f != 0 {
			t.Fatalf("idle pass %d counted %v policy failures, want 0 (a few idle passes are allowed)", i+1, f)
		}
	}
	if n := e.slotPass(); n != 2 {
		t.Fatalf("the pass after %d idle ones placed %d runs, want 2", MaxIdleAllocationPasses, n)
	}
	if f := failed(); f != 1 {
		t.Fatalf("policy_failed %v, want 1", f)
	}
	if r := e.running(ids); !r["r1"] || !r["r2"] {
		t.Fatalf("running %v, want r1 and r2 (launch order, the fallback)", r)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "allocation policy failed") || !strings.Contains(logs, "policy=hostile") ||
		!strings.Contains(logs, "leaves out every run that fits") {
		t.Fatalf("no failure logged with the policy's name:\n%s", logs)
	}
	e.checkSlots(ids...)
	// it keeps leaving everything out: every pass with free slots falls
	// back, and the failures roll the version back (to the built-in fifo)
	e.finish("r1")
	e.finish("r2")
	for i := 0; i < 10 && e.active("hostile") != 0; i++ {
		e.slotPass()
		for _, id := range []string{"r3", "r4"} {
			if e.run(id).State == storage.StateRunning {
				e.finish(id)
			}
		}
		e.launchRuns(tenantRun(fmt.Sprintf("m%d", i), "a", 0))
	}
	if v := e.active("hostile"); v != 0 {
		t.Fatalf("hostile still active (version %d) after %v policy failures", v, failed())
	}
	if s := e.run("r3").State; s == storage.StateLaunched {
		t.Fatalf("r3 still LAUNCHED with free slots after the fallback")
	}
}

// TestSlotManager_guardUnderHostileOrder: a 3-slot run that waited past the
// slot guard gets the slots that free up first, though the namespace's
// policy orders a stream of 1-slot runs before it (small-first): the pass
// holds them for it, as under fifo.
func TestSlotManager_guardUnderHostileOrder(t *testing.T) {
	const guard = 200 * time.Millisecond
	e := newREnv(t, Config{SlotGuard: guard})
	e.pushHostileAlloc("small-first")
	e.worker("w1", 3, time.Hour)
	first := e.launchAll("s1", 1, "s2", 1, "s3", 1)
	if n := e.slotPass(); n != 3 {
		t.Fatalf("placed %d of the first 3 small runs", n)
	}
	big := e.launchAll("big", 3)
	var small []string
	for i := range 3 {
		small = append(small, e.launchAll(fmt.Sprintf("t%d", i), 1)...)
	}
	// before the guard: the policy's order rules (backfill)
	e.finish("s1")
	if n := e.slotPass(); n != 1 || e.run("t0").State != storage.StateRunning {
		t.Fatalf("before the guard: placed %d, t0 %s; want t0 placed (small-first)", n, e.run("t0").State)
	}
	time.Sleep(guard + 50*time.Millisecond)
	for _, id := range []string{"s2", "s3", "t0"} {
		e.finish(id)
		e.slotPass()
		if id != "t0" {
			if r := e.running(small); r["t1"] || r["t2"] {
				t.Fatalf("a 1-slot run took a slot freed for the 3-slot run past its guard: %v", r)
			}
		}
	}
	if s := e.run("big").State; s != storage.StateRunning {
		t.Fatalf("big is %s after 3 slots freed, want RUNNING", s)
	}
	e.checkSlots(append(append(first, big...), small...)...)
}

// TestSlotManager_fillBomb: an allocation policy of 2000 straight-line
// memory.fill of 32 MiB (policies/testdata/hostile/alloc-fill) is stopped at
// its deadline in every pass, which then falls back to launch order: the
// runs get their slots, each pass counts one policy failure.
func TestSlotManager_fillBomb(t *testing.T) {
	e := newREnv(t, Config{})
	e.pushAllocation("fill", "hostile/alloc-fill.wasm")
	ids := e.launchRuns(tenantRun("r1", "a", 0), tenantRun("r2", "a", 0), tenantRun("r3", "a", 0))
	e.worker("w1", 1, time.Hour)
	for i, id := range ids {
		t0 := time.Now()
		n := e.slotPass()
		t.Logf("pass %d: %v (the shared runtime's deadline is 300ms; a figure, not asserted)", i+1, time.Since(t0).Round(time.Millisecond))
		if n != 1 || e.run(id).State != storage.StateRunning {
			t.Fatalf("pass %d placed %d runs, %s %s; want %s placed (launch order)", i+1, n, id, e.run(id).State, id)
		}
		if f := e.metric("wasmsched_allocations_total", "outcome", "policy_failed"); f != float64(i+1) {
			t.Fatalf("pass %d: policy_failed %v, want %d", i+1, f, i+1)
		}
		e.finish(id)
	}
	if !strings.Contains(e.logs.String(), "did not return within its deadline") {
		t.Fatalf("the deadline was not what stopped it:\n%s", e.logs.String())
	}
}
