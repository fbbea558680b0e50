package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

// fill submits n runs id0..id<n-1> to group (pipelined).
func (e *renv) fill(group, prefix string, n int) []string {
	e.t.Helper()
	ids := make([]string, n)
	for lo := 0; lo < n; lo += 500 {
		var batch []storage.SubmitRequest
		for i := lo; i < min(lo+500, n); i++ {
			ids[i] = fmt.Sprintf("%s%05d", prefix, i)
			batch = append(batch, storage.SubmitRequest{Group: group, ID: ids[i]})
		}
		for _, r := range e.st.SubmitBatch(context.Background(), batch) {
			if r.Err != nil {
				e.t.Fatal(r.Err)
			}
		}
	}
	return ids
}

// drained runs the drain task until the drain set is empty.
func (e *renv) drained() {
	e.t.Helper()
	stop := e.runTask(e.rt.drain.Run)
	defer func() {
		if err := stop(); err != nil {
			e.t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		gs, err := e.st.DrainGroups(context.Background(), 10)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(gs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("drain set still %v after 30s", gs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *renv) countStates(ids []string) map[storage.State]int {
	e.t.Helper()
	out := map[storage.State]int{}
	for _, id := range ids {
		out[e.run(id).State]++
	}
	return out
}

// TestCoordinator_deepDiscard: a discard group 5,000 deep (window 8) is
// decided with ONE decision: the oldest run launches and one discard_below
// covers the other 4,999, which the drain task then discards in chunks
// with the policy's reason; a run submitted afterwards is decided on its own.
func TestCoordinator_deepDiscard(t *testing.T) {
	e := newREnv(t, Config{})
	ctx := context.Background()
	if _, err := e.st.SetGroupSettings(ctx, "d", storage.GroupSettings{Policy: "discard", Window: 8}); err != nil {
		t.Fatal(err)
	}
	ids := e.fill("d", "r", 5000)
	e.settle()
	if o := e.outcomes("discard"); o[OutcomeApplied] != 1 {
		t.Fatalf("decisions %v, want exactly 1 applied for a 5,000-deep group", o)
	}
	if st := e.run(ids[0]).State; st != storage.StateLaunched {
		t.Fatalf("oldest run %s, want LAUNCHED", st)
	}
	sn, err := e.st.Snapshot(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if sn.WaitingTotal != 0 || len(sn.Waiting) != 0 {
		t.Fatalf("snapshot after the decision: %d waiting (total %d), want none: discard_below covers them", len(sn.Waiting), sn.WaitingTotal)
	}
	e.drained()
	if c := e.countStates(ids); c[storage.StateDiscarded] != 4999 || c[storage.StateLaunched] != 1 {
		t.Fatalf("states %v, want 1 LAUNCHED and 4999 DISCARDED", c)
	}
	if r := e.run(ids[4999]); r.Reason != "group busy: discard policy drops later runs" {
		t.Fatalf("drained run reason %q", r.Reason)
	}
	if got := e.metric("wasmsched_drained_runs_total"); got != 4999 {
		t.Fatalf("wasmsched_drained_runs_total %v, want 4999", got)
	}
	e.submit("d", "late", 1)
	e.settle()
	if st := e.run("late").State; st != storage.StateDiscarded {
		t.Fatalf("a run submitted while the oldest is active: %s, want DISCARDED", st)
	}
}

// TestCoordinator_deepPriority: newest wins at 5,000 deep: the newest run
// launches, everything older is covered by one discard_below; the next
// submit stops the launched one and launches itself. Nothing older ever
// launches.
func TestCoordinator_deepPriority(t *testing.T) {
	e := newREnv(t, Config{})
	ctx := context.Background()
	if _, err := e.st.SetGroupSettings(ctx, "p", storage.GroupSettings{Policy: "priority", Window: 8}); err != nil {
		t.Fatal(err)
	}
	ids := e.fill("p", "r", 5000)
	e.settle()
	if o := e.outcomes("priority"); o[OutcomeApplied] != 1 {
		t.Fatalf("decisions %v, want exactly 1 applied", o)
	}
	e.submit("p", "newer", 1)
	e.settle()
	e.drained()
	c := e.countStates(ids[:4999])
	if c[storage.StateDiscarded] != 4999 {
		t.Fatalf("older runs %v, want all 4999 DISCARDED", c)
	}
	e.wantStates([]string{ids[4999], "newer"}, storage.StateStopped, storage.StateLaunched)
	for _, id := range ids[:4999] {
		if r := e.run(id); !r.LaunchedAt.IsZero() {
			t.Fatalf("run %s was launched; its policy discarded it", id)
		}
	}
}

// TestCoordinator_v1OnTruncatedWindow: a version 1 plugin (the discard
// built-in as built before ABI v2, testdata/discard-v1.wasm) on a group
// deeper than its window discards point-wise, one window per decision, and
// the host asks it again until the group settles: every run but the oldest
// ends DISCARDED, each decision bounded by the window.
func TestCoordinator_v1OnTruncatedWindow(t *testing.T) {
	e := newREnv(t, Config{})
	ctx := context.Background()
	v1, err := os.ReadFile("testdata/discard-v1.wasm")
	if err != nil {
		t.Fatal(err)
	}
	e.push("discard1", v1)
	if _, err := e.st.SetGroupSettings(ctx, "g", storage.GroupSettings{Policy: "discard1", Window: 8}); err != nil {
		t.Fatal(err)
	}
	ids := e.fill("g", "r", 300)
	for i := 0; i < 100 && e.pass(); i++ {
	}
	c := e.countStates(ids)
	if c[storage.StateDiscarded] != 299 || c[storage.StateLaunched] != 1 || e.run(ids[0]).State != storage.StateLaunched {
		t.Fatalf("states %v, want the oldest LAUNCHED and 299 DISCARDED", c)
	}
	// 300 runs, 16 per window: the first decision launches 1 and discards
	// 15, then 16 per decision: 19 applied, then a settle
	if o := e.outcomes("discard1"); o[OutcomeApplied] != 19 || o[OutcomeInvalid] != 0 {
		t.Fatalf("decisions %v, want 19 applied (one per window of 16 runs)", o)
	}
	if d, _ := storagetest.DirtyGroups(ctx, e.st, 0); len(d) != 0 {
		t.Fatalf("dirty %v after the group settled", d)
	}
}

// TestCoordinator_decisionRecord: a run the coordinator launched records
// the decision (claim id, the leader's epoch, the action, the policy's
// reason) and the exact policy version (sha256 of the built-in, registry
// version 0); the group's history has the decision.
func TestCoordinator_decisionRecord(t *testing.T) {
	e := newREnv(t, Config{})
	e.group("g", "wait", 1)
	e.submit("g", "r1", 1)
	e.settle()
	r := e.run("r1")
	wasm, _ := plugins.Builtin("wait")
	d := r.Decision
	if d == nil || d.Epoch != e.lease.Epoch() || !strings.HasPrefix(d.ID, fmt.Sprintf("%d:g#1:", e.lease.Epoch())) || d.Action != storage.ActionLaunch ||
		d.Reason == "" || d.Policy != "wait" || d.PolicySHA256 != digest.SHA256(wasm) || d.PolicyVersion != digest.Short(d.PolicySHA256) || d.PolicyRegistry != 0 {
		t.Fatalf("decision record %+v", d)
	}
	ds, err := e.st.GroupDecisions(context.Background(), "g")
	if err != nil || len(ds) != 1 || ds[0].ID != d.ID || ds[0].Launched != 1 {
		t.Fatalf("group decisions %+v, %v", ds, err)
	}
	// a group deleted and made again decides under new ids (its version
	// starts over; its incarnation does not)
	if _, err := e.st.RequestStop(context.Background(), "r1", "done with it"); err != nil { // LAUNCHED: STOPPED at once
		t.Fatal(err)
	}
	e.settle()
	if _, err := e.st.DeleteGroup(context.Background(), "g", false, ""); err != nil {
		t.Fatal(err)
	}
	e.submit("g", "r2", 1)
	e.settle()
	d2 := e.run("r2").Decision
	if d2 == nil || d2.ID == d.ID || !strings.HasPrefix(d2.ID, fmt.Sprintf("%d:g#2:", e.lease.Epoch())) {
		t.Fatalf("the re-made group's decision %+v repeats or misnames %s", d2, d.ID)
	}
}
