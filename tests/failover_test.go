package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// hostSet tracks the `serve` processes of a test by identity.
type hostSet struct {
	procs map[string]*Proc // by identity
}

func (h *hostSet) add(t *testing.T, p *Proc) { h.procs[p.Identity(t)] = p }

// killLeader kill -9s the namespace's leader (one of h's hosts), drops it
// from h and waits until another of h's hosts leads; it returns the killed
// leader and the new one.
func (h *hostSet) killLeader(t *testing.T, r *redistest.Server, ns string) (old, next client.Leader) {
	t.Helper()
	old = Leader(t, r, ns)
	p := h.procs[old.Identity]
	if p == nil {
		t.Fatalf("leader %q is not one of our hosts", old.Identity)
	}
	p.Kill()
	delete(h.procs, old.Identity)
	var others []string
	for id := range h.procs {
		others = append(others, id)
	}
	return old, waitLeader(t, r, ns, 5*rtLeaseTTL, old.Epoch, others...)
}

// TestFixedSlotFailover is SeaTunnel's fixed-slot master failover, three
// times in a row: 2 hosts, 2 workers with 8 slots each, runs holding 11
// slots (4+4+3), 5 free. kill -9 the leader: the standby takes over and
// restores the runs onto the very slots they hold (same worker, index and
// assignment token), 5 stay free, no run is restarted (the worker journals
// show one execution per run); a new host replaces the killed one. At the
// end every run succeeded and 16/16 slots are free.
func TestFixedSlotFailover(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "fixed"
	st := Store(t, r, ns)
	hosts := &hostSet{procs: map[string]*Proc{}}
	hosts.add(t, RuntimeHost(t, "host-a", r, ns, "127.0.0.1:7701"))
	hosts.add(t, RuntimeHost(t, "host-b", r, ns, "127.0.0.1:7702"))
	_, j1 := StartWorker(t, "w1", r, ns, "127.0.0.1:7801", 8)
	_, j2 := StartWorker(t, "w2", r, ns, "127.0.0.1:7802", 8)
	journals := map[string]string{"w1": j1, "w2": j2}

	runs := map[string]int{"big-a": 4, "big-b": 4, "small": 3}
	for id, k := range runs {
		// One group per run, so all three are launched at once.
		Submit(t, r, ns, "g-"+id, id, "--slots", fmt.Sprint(k), "--duration", "12s")
	}
	for id := range runs {
		WaitRunState(t, st, id, 15*time.Second, storage.StateRunning)
	}
	var before client.Slots
	WaitFor(t, 20*time.Second, "11 slots assigned, 5 free", func() bool {
		before = Slots(t, r, ns)
		return before.Assigned == 11 && before.Free == 5
	})
	want := Assignments(before)
	WaitFor(t, 15*time.Second, "one execution per run", func() bool {
		return len(ReadJournals(t, journals)) == len(runs)
	})

	for round := 1; round <= 3; round++ {
		_, nl := hosts.killLeader(t, r, ns)
		epoch := nl.Epoch
		// The new leader restores the runs: wait until the restore queue is
		// empty and the slot table is stable, then compare.
		WaitFor(t, 15*time.Second, "restore queue empty", func() bool { return RestoreQueueLen(t, st) == 0 })
		time.Sleep(300 * time.Millisecond)
		after := Slots(t, r, ns)
		if got := Assignments(after); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: assignments changed across the failover:\nbefore %v\nafter  %v", round, want, got)
		}
		if after.Free != 5 || after.Assigned != 11 {
			t.Fatalf("round %d: free %d assigned %d after the failover, want 5 and 11", round, after.Free, after.Assigned)
		}
		for id := range runs {
			if r, err := st.GetRun(testCtx(t, 5*time.Second), id); err != nil || r.State != storage.StateRunning {
				t.Fatalf("round %d: run %s: %v %v, want RUNNING", round, id, r.State, err)
			}
		}
		if n := len(ReadJournals(t, journals)); n != len(runs) {
			t.Fatalf("round %d: %d executions after the failover, want %d (a run was restarted)", round, n, len(runs))
		}
		t.Logf("round %d: leader killed, epoch -> %d; 11 assignments kept with their tokens, 5 free", round, epoch)
		hosts.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", round+2), r, ns, fmt.Sprintf("127.0.0.1:77%02d", round+2)))
	}

	all := WaitAllFinal(t, st, 30*time.Second)
	for id := range runs {
		if all[id].State != storage.StateSucceeded {
			t.Errorf("run %s: %s (%s), want SUCCEEDED", id, all[id].State, all[id].Reason)
		}
	}
	ex := ExecutionsByRun(ReadJournals(t, journals))
	for id := range runs {
		if len(ex[id]) != 1 {
			t.Errorf("run %s: %d executions %v, want 1", id, len(ex[id]), ex[id])
			continue
		}
		i := slices.IndexFunc(want, func(a SlotAssignment) bool { return a.Run == id && a.Token == ex[id][0].Token })
		if i < 0 {
			t.Errorf("run %s executed with token %s, not one of its assignments %v", id, ex[id][0].Token, want)
		}
	}
	WaitFor(t, 20*time.Second, "16/16 slots free", func() bool {
		s := Slots(t, r, ns)
		return s.Free == 16 && s.Assigned == 0
	})
}

// TestWorkerKill9 kills a worker mid-run: after its heartbeat TTL the
// leader reaps it (its slots disappear) and every affected run is either
// restarted on the surviving worker (slot-reuse policy: reallocate) with a
// new assignment token, or FAILED with a reason; none is left hanging.
func TestWorkerKill9(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "wkill"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7901")
	wa, ja := StartWorker(t, "wa", r, ns, "127.0.0.1:7911", 4)
	wb, jb := StartWorker(t, "wb", r, ns, "127.0.0.1:7912", 4)
	ida := LogAttr(wa.WaitLog(t, time.Second, "worker registered"), "identity")
	idb := LogAttr(wb.WaitLog(t, time.Second, "worker registered"), "identity")
	journals := map[string]string{"wa": ja, "wb": jb}

	var ids []string
	for i := range 4 {
		ids = append(ids, Submit(t, r, ns, fmt.Sprintf("g%d", i), fmt.Sprintf("run-%d", i), "--duration", "3s"))
	}
	for _, id := range ids {
		WaitRunState(t, st, id, 15*time.Second, storage.StateRunning)
	}
	WaitFor(t, 15*time.Second, "4 executions started", func() bool { return len(ReadJournals(t, journals)) == 4 })
	onWorker := map[string][]string{}
	for _, a := range Assignments(Slots(t, r, ns)) {
		onWorker[a.Worker] = append(onWorker[a.Worker], a.Run)
	}
	// Kill the worker that holds the most runs.
	victim, vid, survivor, sid := wa, ida, wb, idb
	if len(onWorker[idb]) > len(onWorker[ida]) {
		victim, vid, survivor, sid = wb, idb, wa, ida
	}
	affected := onWorker[vid]
	t.Logf("killing %s holding %v; %s holds %v", victim.Name, affected, survivor.Name, onWorker[sid])
	before := ExecutionsByRun(ReadJournals(t, journals))
	victim.Kill()

	WaitFor(t, 10*rtHeartbeatTTL, "the dead worker's slots to be freed", func() bool {
		for _, w := range Slots(t, r, ns).Workers {
			if w.Identity == vid && (w.Alive || len(w.Slots) > 0) {
				return false
			}
		}
		return true
	})
	all := WaitAllFinal(t, st, 30*time.Second)
	ex := ExecutionsByRun(ReadJournals(t, journals))
	for _, id := range ids {
		run := all[id]
		if !slices.Contains(affected, id) {
			if run.State != storage.StateSucceeded || len(ex[id]) != 1 {
				t.Errorf("unaffected run %s: %s with %d executions, want SUCCEEDED once", id, run.State, len(ex[id]))
			}
			continue
		}
		switch run.State {
		case storage.StateSucceeded:
			// Reallocated: one more execution, on the survivor, under a new token.
			again := slices.IndexFunc(ex[id], func(e Execution) bool {
				return e.Worker == survivor.Name && e.Token != before[id][0].Token
			})
			if len(ex[id]) != 2 || again < 0 {
				t.Errorf("reallocated run %s: executions %v, want the killed one plus one on %s with a new token", id, ex[id], survivor.Name)
			}
		case storage.StateFailed:
			if run.Reason == "" || len(ex[id]) != 1 {
				t.Errorf("failed run %s: reason %q, executions %v", id, run.Reason, ex[id])
			}
		default:
			t.Errorf("affected run %s ended %s (%s)", id, run.State, run.Reason)
		}
		t.Logf("affected run %s: %s %q, executions %v", id, run.State, run.Reason, ex[id])
	}
	WaitFor(t, 20*time.Second, "the survivor's 4 slots free", func() bool {
		s := Slots(t, r, ns)
		return s.Free == 4 && s.Assigned == 0
	})
}

// TestNoDoubleExecution: 3 hosts race for the namespace while runs are
// submitted continuously into wait, discard and priority groups and the
// leader is killed twice. Every worker journals every execution start; no
// run may be executed more than once (no worker dies here, so no run is
// ever legitimately reallocated: one execution per run id), discarded runs
// never, and every run ends final.
func TestNoDoubleExecution(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "race"
	st := Store(t, r, ns)
	hosts := &hostSet{procs: map[string]*Proc{}}
	for i := range 3 {
		hosts.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", i), r, ns, fmt.Sprintf("127.0.0.1:76%02d", i)))
	}
	journals := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("w%d", i)
		_, journals[name] = StartWorker(t, name, r, ns, fmt.Sprintf("127.0.0.1:76%02d", 50+i), 3)
	}
	groups := []struct{ name, policy string }{
		{"wait-a", "wait"}, {"wait-b", "wait"}, {"disc-a", "discard"}, {"disc-b", "discard"}, {"prio-a", "priority"}, {"prio-b", "priority"},
	}
	for _, g := range groups {
		SetGroup(t, r, ns, g.name, g.policy, 1+len(g.name)%2)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var submitted atomic.Int64
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; ctx.Err() == nil; i++ {
				g := groups[rng.IntN(len(groups))]
				_, err := st.Submit(ctx, storage.SubmitRequest{
					Group:    g.name,
					ID:       fmt.Sprintf("c%d-%04d", c, i),
					Slots:    1 + rng.IntN(2),
					Duration: time.Duration(rng.IntN(300)) * time.Millisecond,
				})
				if err == nil {
					submitted.Add(1)
				}
				time.Sleep(time.Duration(10+rng.IntN(30)) * time.Millisecond)
			}
		}()
	}
	next := 3
	for kill := range 2 {
		time.Sleep(1500 * time.Millisecond)
		l, nl := hosts.killLeader(t, r, ns)
		t.Logf("kill %d: leader epoch %d -> %d", kill+1, l.Epoch, nl.Epoch)
		hosts.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", next), r, ns, fmt.Sprintf("127.0.0.1:76%02d", next)))
		next++
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()

	all := WaitAllFinal(t, st, 60*time.Second)
	if int64(len(all)) != submitted.Load() {
		t.Errorf("%d runs in the store, %d submitted", len(all), submitted.Load())
	}
	ex := ExecutionsByRun(ReadJournals(t, journals))
	states := map[storage.State]int{}
	for id, run := range all {
		states[run.State]++
		n := len(ex[id])
		switch {
		case n > 1:
			t.Errorf("run %s (%s) executed %d times: %v", id, run.State, n, ex[id])
		case run.State == storage.StateDiscarded && n != 0:
			t.Errorf("run %s DISCARDED but executed: %v", id, ex[id])
		case run.State == storage.StateSucceeded && n != 1:
			t.Errorf("run %s SUCCEEDED with %d executions", id, n)
		}
	}
	for id := range ex {
		if _, ok := all[id]; !ok {
			t.Errorf("journal has unknown run %s", id)
		}
	}
	t.Logf("%d runs: %v", len(all), states)
	WaitFor(t, 20*time.Second, "9/9 slots free", func() bool {
		s := Slots(t, r, ns)
		return s.Free == 9 && s.Assigned == 0
	})
}
