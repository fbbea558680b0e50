package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/storage"
)

// launchAll submits runs (id -> slots) to their own wait groups and launches them.
func (e *renv) launchAll(runs ...any) []string {
	e.t.Helper()
	var ids []string
	for i := 0; i+1 < len(runs); i += 2 {
		id, slots := runs[i].(string), runs[i+1].(int)
		e.group("g-"+id, "wait", 1)
		e.submit("g-"+id, id, slots)
		ids = append(ids, id)
	}
	e.rt.coord.noPlace = true // the slot manager's work: the apply does not place them
	defer func() { e.rt.coord.noPlace = false }()
	for i := 0; i < 10 && e.pass(); i++ {
	}
	for _, id := range ids {
		if s := e.run(id).State; s != storage.StateLaunched {
			e.t.Fatalf("%s is %s, want LAUNCHED", id, s)
		}
	}
	return ids
}

// checkSlots verifies the slot table against the runs: every assignment of
// a RUNNING run is in its slot, no slot is used twice.
func (e *renv) checkSlots(ids ...string) (assigned int) {
	e.t.Helper()
	sv, err := e.st.Slots(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	held := map[string]string{}
	for _, w := range sv.Workers {
		for _, s := range w.Slots {
			if s.Run != "" {
				held[fmt.Sprintf("%s#%d", w.Identity, s.Index)] = fmt.Sprintf("%s#%s#%d", s.Run, s.Token, s.Task)
			}
		}
	}
	for _, id := range ids {
		r := e.run(id)
		if r.State == storage.StateLaunched && len(r.Assignments) != 0 {
			e.t.Fatalf("LAUNCHED %s holds %v", id, r.Assignments)
		}
		if r.State != storage.StateRunning {
			continue
		}
		if len(r.Assignments) != r.Slots {
			e.t.Fatalf("%s has %d of %d slots", id, len(r.Assignments), r.Slots)
		}
		for _, a := range r.Assignments {
			f := fmt.Sprintf("%s#%d", a.Worker, a.Slot)
			if held[f] != fmt.Sprintf("%s#%s#%d", id, a.Token, a.Task) {
				e.t.Fatalf("slot %s holds %q, run %s task %d says it is its own", f, held[f], id, a.Task)
			}
			assigned++
		}
	}
	if assigned != len(held) || assigned != sv.Assigned {
		e.t.Fatalf("runs hold %d slots, table %d (%d assigned)", assigned, len(held), sv.Assigned)
	}
	return assigned
}

// TestSlotManagerStrictFIFOAllOrNothing: with a zero guard (serve
// --slot-guard 0) a run that does not fit holds the queue at once.
func TestSlotManagerStrictFIFOAllOrNothing(t *testing.T) {
	e := newREnv(t, Config{SlotGuard: time.Nanosecond})
	e.worker("w1", 2, time.Hour)
	ids := e.launchAll("big", 3, "small", 1)
	// big (older) needs 3 of 2: it waits, and small does not overtake it
	if n := e.slotPass(); n != 0 {
		t.Fatalf("allocated %d", n)
	}
	e.wantStates(ids, storage.StateLaunched, storage.StateLaunched)
	if a := e.checkSlots(ids...); a != 0 {
		t.Fatalf("assigned %d", a)
	}
	if got := e.metric("wasmsched_allocations_total", "outcome", "no_slots"); got != 1 {
		t.Fatalf("no_slots %v", got)
	}
	e.worker("w2", 2, time.Hour)
	if n := e.slotPass(); n != 2 {
		t.Fatalf("allocated %d, want 2", n)
	}
	e.wantStates(ids, storage.StateRunning, storage.StateRunning)
	if a := e.checkSlots(ids...); a != 4 {
		t.Fatalf("assigned %d", a)
	}
}

// TestSlotManagerBackfill: with the default guard a run that does not fit
// lets the younger runs that fit take slots; once it has waited the guard
// the freed slots are held for it.
func TestSlotManagerBackfill(t *testing.T) {
	e := newREnv(t, Config{SlotGuard: 300 * time.Millisecond})
	e.worker("w1", 2, time.Hour)
	ids := e.launchAll("big", 3, "small", 1, "small2", 1)
	if n := e.slotPass(); n != 2 {
		t.Fatalf("allocated %d, want 2 (the younger 1-slot runs)", n)
	}
	e.wantStates(ids, storage.StateLaunched, storage.StateRunning, storage.StateRunning)
	if got := e.metric("wasmsched_allocations_total", "outcome", "no_slots"); got != 1 {
		t.Fatalf("no_slots %v", got)
	}
	// big waits past the guard: a third 1-slot run does not pass it once
	// a slot frees, the slot is held.
	time.Sleep(350 * time.Millisecond)
	late := e.launchAll("late", 1)
	e.finish("small")
	if n := e.slotPass(); n != 0 {
		t.Fatalf("allocated %d past the held run", n)
	}
	e.wantStates(late, storage.StateLaunched)
	e.finish("small2")
	e.worker("w2", 1, time.Hour) // 3 free: big fits, late waits for one more
	if n := e.slotPass(); n != 1 {
		t.Fatalf("allocated %d, want 1 (big)", n)
	}
	e.wantStates(append(ids[:1], late...), storage.StateRunning, storage.StateLaunched)
	if !strings.Contains(e.logs.String(), "holding freed slots") {
		t.Fatalf("no log of the hold:\n%s", e.logs.String())
	}
}

func TestSlotManagerNoOverAllocation(t *testing.T) {
	e := newREnv(t, Config{SlotGuard: time.Nanosecond})
	e.worker("w1", 3, time.Hour)
	ids := e.launchAll("a", 2, "b", 2, "c", 1)
	// two passes race (as a go-redis retry or a slow previous pass would)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.rt.slots.Pass(context.Background(), e.lease); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	e.wantStates(ids, storage.StateRunning, storage.StateLaunched, storage.StateLaunched)
	if a := e.checkSlots(ids...); a != 2 {
		t.Fatalf("assigned %d, want 2", a)
	}
	// a finishes: b (older than c) gets 2 of the 3 slots, then c the last one
	e.finish("a")
	e.slotPass()
	e.wantStates(ids, storage.StateSucceeded, storage.StateRunning, storage.StateRunning)
	if a := e.checkSlots(ids...); a != 3 {
		t.Fatalf("assigned %d, want 3", a)
	}
}

func TestSlotManagerTaskFencedAndLeaseCheck(t *testing.T) {
	e := newREnv(t, Config{})
	e.worker("w1", 1, time.Hour)
	ids := e.launchAll("x", 1)
	old := e.lease
	e.newTerm()
	if _, err := e.rt.slots.Pass(context.Background(), old); err == nil {
		t.Fatal("allocation with a stale fence succeeded")
	}
	e.wantStates(ids, storage.StateLaunched)
	old.Revoke("test")
	if n, err := e.rt.slots.Pass(context.Background(), old); n != 0 || err != nil {
		t.Fatalf("pass with a revoked lease: %d %v", n, err)
	}
	if n := e.slotPass(); n != 1 {
		t.Fatalf("new term allocated %d", n)
	}
}

// TestSlotManagerUnfit: a LAUNCHED run needing more slots than every live
// worker has together is failed with a reason after UnfitTimeout; a run
// that fits again in time (a worker joined) is not.
func TestSlotManagerUnfit(t *testing.T) {
	e := newREnv(t, Config{SlotGuard: time.Hour, UnfitTimeout: 200 * time.Millisecond, SlotInterval: time.Millisecond})
	e.worker("w1", 2, time.Hour)
	ids := e.launchAll("huge", 5, "three", 3, "one", 1)
	e.slotPass() // one runs (backfill); huge and three need more than the 2 live slots
	e.wantStates(ids, storage.StateLaunched, storage.StateLaunched, storage.StateRunning)
	e.worker("w2", 1, time.Hour) // 3 live slots: three could fit one day
	time.Sleep(250 * time.Millisecond)
	e.slotPass()
	e.wantStates(ids, storage.StateFailed, storage.StateLaunched, storage.StateRunning)
	r := e.run("huge")
	if !strings.Contains(r.Reason, "needs 5 slots; all live workers together have 3") || !strings.Contains(r.Reason, "can never fit") {
		t.Fatalf("reason %q", r.Reason)
	}
	if got := e.metric("wasmsched_allocations_total", "outcome", "unfit"); got != 1 {
		t.Fatalf("unfit %v", got)
	}
}

// TestSlotManagerUnfit_placement: a LAUNCHED run whose group requires a
// label no live worker carries fails after UnfitTimeout with a reason
// naming the requirement, however many other slots are free; one that a
// live worker could take (busy now) waits.
func TestSlotManagerUnfit_placement(t *testing.T) {
	e := newREnv(t, Config{SlotGuard: time.Hour, UnfitTimeout: 200 * time.Millisecond, SlotInterval: time.Millisecond})
	ctx := context.Background()
	e.worker("cpu", 4, time.Hour)
	if err := e.st.RegisterWorkerWith(ctx, "gpu", 1, time.Hour, storage.WorkerPlacement{Labels: []abi.Label{{Key: "gpu", Value: "yes"}}}); err != nil {
		t.Fatal(err)
	}
	for g, label := range map[string]string{"g-g0": "gpu", "g-tpu": "tpu", "g-gpu": "gpu"} {
		if _, err := e.st.SetGroupSettings(ctx, g, storage.GroupSettings{Require: []abi.Label{{Key: label, Value: "yes"}}}); err != nil {
			t.Fatal(err)
		}
	}
	ids := e.launchAll("g0", 1, "tpu", 1, "gpu", 1)
	e.slotPass() // g0 takes the gpu slot; tpu has no worker, gpu waits for the busy one
	e.wantStates(ids, storage.StateRunning, storage.StateLaunched, storage.StateLaunched)
	if w := e.run("g0").Assignments[0].Worker; w != "gpu" {
		t.Fatalf("g0 on %s, want gpu", w)
	}
	time.Sleep(250 * time.Millisecond)
	e.slotPass()
	e.wantStates(ids, storage.StateRunning, storage.StateFailed, storage.StateLaunched)
	if r := e.run("tpu"); !strings.Contains(r.Reason, "needs 1 slot(s) on workers with tpu=yes") || !strings.Contains(r.Reason, "have 0") {
		t.Fatalf("reason %q", r.Reason)
	}
}
