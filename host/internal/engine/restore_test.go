package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

func (e *renv) restoreAll() {
	e.t.Helper()
	if err := e.rt.restore.RestoreAll(context.Background(), e.lease); err != nil {
		e.t.Fatal(err)
	}
}

func (e *renv) restorePass() {
	e.t.Helper()
	if err := e.rt.restore.Pass(context.Background(), e.lease); err != nil {
		e.t.Fatal(err)
	}
}

// runOnWorkers launches run id with k slots and allocates them; the free
// slots are picked in worker#index order.
func (e *renv) runOnWorkers(id string, k int) storage.Run {
	e.t.Helper()
	e.launchAll(id, k)
	if n := e.slotPass(); n != 1 {
		e.t.Fatalf("allocated %d", n)
	}
	return e.run(id)
}

// expire makes a worker's heartbeat expiry lie in the past, as if it had
// stopped heartbeating (a dead worker).
func (e *renv) expire(worker string) {
	e.t.Helper()
	if err := e.rdb.ZAdd(context.Background(), keyspace.Of(e.st).Workers(), redis.Z{Score: 1, Member: worker}).Err(); err != nil {
		e.t.Fatal(err)
	}
}

func fmtAs(as []storage.Assignment) string { return fmt.Sprint(as) }

func TestRestoreKeepsVerifiedSlotsAndTokens(t *testing.T) {
	e := newREnv(t, Config{})
	e.worker("w1", 2, time.Hour)
	e.worker("w2", 2, time.Hour)
	before := e.runOnWorkers("r", 3)
	e.newTerm() // failover
	e.restoreAll()
	after := e.run("r")
	if after.State != storage.StateRunning || fmtAs(after.Assignments) != fmtAs(before.Assignments) {
		t.Fatalf("after restore %s %v, want RUNNING %v", after.State, after.Assignments, before.Assignments)
	}
	if got := e.metric("wasmsched_restores_total", "outcome", RestoreKept); got != 1 {
		t.Fatalf("kept %v", got)
	}
	e.checkSlots("r")
}

func TestRestoreReallocatesDeadWorkersSlot(t *testing.T) {
	e := newREnv(t, Config{})
	e.worker("w1", 1, time.Hour)
	e.worker("w2", 1, time.Hour) // will die
	before := e.runOnWorkers("r", 2)
	if before.Assignments[0].Worker != "w1" || before.Assignments[1].Worker != "w2" {
		t.Fatalf("assignments %v", before.Assignments)
	}
	e.worker("w3", 1, time.Hour) // spare
	e.launchAll("other", 1)      // LAUNCHED without slots: left to the slot manager
	e.expire("w2")
	e.newTerm()
	e.restoreAll()
	after := e.run("r")
	if after.State != storage.StateRunning || len(after.Assignments) != 2 {
		t.Fatalf("after %+v", after)
	}
	if after.Assignments[0] != before.Assignments[0] {
		t.Fatalf("verified task 0 changed: %v -> %v", before.Assignments[0], after.Assignments[0])
	}
	if a := after.Assignments[1]; a.Worker != "w3" || a.Token == before.Assignments[1].Token {
		t.Fatalf("task 1 %+v, want a fresh token on w3", a)
	}
	if s := e.run("other").State; s != storage.StateLaunched {
		t.Fatalf("other %s", s)
	}
	if got := e.metric("wasmsched_restores_total", "outcome", RestoreReallocated); got != 1 {
		t.Fatalf("reallocated %v", got)
	}
}

func TestRestoreShortageWritesNothingAndRetries(t *testing.T) {
	e := newREnv(t, Config{})
	e.worker("w1", 1, time.Hour)
	e.worker("w2", 1, time.Hour)
	before := e.runOnWorkers("r", 2)
	e.expire("w2") // no spare slot
	e.newTerm()
	e.restoreAll()
	mid := e.run("r")
	if mid.State != storage.StateRunning || fmtAs(mid.Assignments) != fmtAs(before.Assignments) {
		t.Fatalf("shortage changed the run: %v -> %s %v", before.Assignments, mid.State, mid.Assignments)
	}
	if e.rt.restore.Pending() != 1 {
		t.Fatalf("pending %d", e.rt.restore.Pending())
	}
	if got := e.metric("wasmsched_restores_total", "outcome", RestoreNoSlots); got != 1 {
		t.Fatalf("no_slots %v", got)
	}
	// the periodic pass reaps w2 (its slot is gone) and retries: still short
	e.restorePass()
	if s := e.run("r"); s.State != storage.StateRunning || fmtAs(s.Assignments) != fmtAs(before.Assignments) {
		t.Fatalf("after reap: %s %v", s.State, s.Assignments)
	}
	sv, err := e.st.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sv.Workers) != 1 || sv.Assigned != 1 {
		t.Fatalf("after reap: %+v", sv)
	}
	// a slot appears: the next pass restores the run
	e.worker("w3", 1, time.Hour)
	e.restorePass()
	after := e.run("r")
	if after.Assignments[0] != before.Assignments[0] || after.Assignments[1].Worker != "w3" {
		t.Fatalf("after %v", after.Assignments)
	}
	if e.rt.restore.Pending() != 0 {
		t.Fatalf("pending %d", e.rt.restore.Pending())
	}
	if q, _ := e.st.RestoreQueue(context.Background(), 0); len(q) != 0 {
		t.Fatalf("restore queue %v", q)
	}
	e.checkSlots("r")
}

func TestRestoreTaskFailsOverWithRunningTasks(t *testing.T) {
	// The whole restore task: the first pass restores, later ones reap.
	// The term's start spares w2 for its heartbeat TTL (its beats may have
	// died with a failed master): its task stays on it until then, and
	// moves to w3 after. (4 s: w2 must still be alive when the run is
	// allocated, after the policies' first load, which took 2 s once under
	// -race on a loaded machine.)
	const ttl = 4 * time.Second
	e := newREnv(t, Config{})
	e.worker("w1", 1, time.Hour)
	e.worker("w2", 1, ttl)
	before := e.runOnWorkers("r", 2)
	e.worker("w3", 1, time.Hour)
	e.expire("w2")
	termAt := time.Now()
	stop := e.runTask(e.rt.restore.Run)
	waitFor(t, 10*time.Second, "the first restore pass", func() bool { return !e.rt.restore.LastPass().IsZero() })
	if r := e.run("r"); fmtAs(r.Assignments) != fmtAs(before.Assignments) && time.Since(termAt) < ttl {
		t.Fatalf("w2's task moved within its grace: %v -> %v", before.Assignments, r.Assignments)
	}
	waitFor(t, 60*time.Second, "w2's task moved to w3", func() bool {
		r := e.run("r")
		return len(r.Assignments) == 2 && r.Assignments[1].Worker == "w3"
	})
	if d := time.Since(termAt); d < ttl {
		t.Fatalf("w2's task moved %v into the term, within its heartbeat TTL %v", d, ttl)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e.checkSlots("r")
}
