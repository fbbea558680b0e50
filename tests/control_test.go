package tests

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestGroupPauseResume: a paused group launches nothing while submits pile
// up (its runs stay WAITING through several leader passes and a leader
// failover), run explain says it is paused, and after resume its runs go
// in submit order.
func TestGroupPauseResume(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "pause"
	st := Store(t, r, ns)
	hosts := &hostSet{procs: map[string]*Proc{}}
	for i := range 2 {
		hosts.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", i), r, ns, fmt.Sprintf("127.0.0.1:79%02d", i)))
	}
	StartWorker(t, "w", r, ns, "127.0.0.1:7910", 2)
	SetGroup(t, r, ns, "g", "wait", 1)
	cli(t, r, ns, "group", "pause", "g", "--who", "ops")
	var ids []string
	for i := range 5 {
		ids = append(ids, Submit(t, r, ns, "g", fmt.Sprintf("p%d", i), "--duration", "50ms"))
	}
	if out := cli(t, r, ns, "run", "explain", "p0"); !strings.Contains(out, "paused") {
		t.Fatalf("explain of a paused group's run:\n%s", out)
	}
	l := Leader(t, r, ns)
	hosts.procs[l.Identity].Kill() // the pause is in Redis: the next leader keeps it
	var others []string
	for id := range hosts.procs {
		if id != l.Identity {
			others = append(others, id)
		}
	}
	waitLeader(t, r, ns, 15*time.Second, l.Epoch, others...)
	time.Sleep(time.Second) // the new term's passes
	for _, id := range ids {
		if run, err := st.GetRun(testCtx(t, 5*time.Second), id); err != nil || run.State != storage.StateWaiting {
			t.Fatalf("run %s of the paused group: %s %v", id, run.State, err)
		}
	}
	if out := cli(t, r, ns, "group", "show", "g"); !strings.Contains(out, "PAUSED") || !strings.Contains(out, "ops") {
		t.Fatalf("group show of a paused group:\n%s", out)
	}
	cli(t, r, ns, "group", "resume", "g")
	all := WaitAllFinal(t, st, 30*time.Second)
	started := make([]storage.Run, 0, len(ids))
	for _, id := range ids {
		if all[id].State != storage.StateSucceeded {
			t.Fatalf("run %s after resume: %s", id, all[id].State)
		}
		started = append(started, all[id])
	}
	sort.Slice(started, func(i, j int) bool { return started[i].StartedAt.Before(started[j].StartedAt) })
	for i, run := range started {
		if run.ID != ids[i] {
			t.Fatalf("after resume the runs started in the order %v, want submit order", started)
		}
	}
}

// TestGroupDrain: `group drain G --discard --stop` pauses the group,
// discards its waiting runs, stops its running one and waits for it; then
// `group delete G` succeeds.
func TestGroupDrain(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "gdrain"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7920")
	StartWorker(t, "w", r, ns, "127.0.0.1:7921", 2)
	SetGroup(t, r, ns, "nightly", "wait", 1)
	Submit(t, r, ns, "nightly", "long", "--duration", "1h")
	WaitRunState(t, st, "long", 15*time.Second, storage.StateRunning)
	for i := range 20 {
		Submit(t, r, ns, "nightly", fmt.Sprintf("q%02d", i))
	}
	if _, stderr, code := RunCLIErr(t, "--redis", r.URL(), "-n", ns, "group", "delete", "nightly"); code != 2 || !strings.Contains(stderr, "active") {
		t.Fatalf("delete of a busy group: exit %d %q", code, stderr)
	}
	out := cli(t, r, ns, "group", "drain", "nightly", "--discard", "--stop", "--wait", "20s")
	for _, want := range []string{"paused", "20 waiting run(s) discarded", "1 active run(s) asked to stop", "drained"} {
		if !strings.Contains(out, want) {
			t.Fatalf("group drain printed:\n%s\nwant %q", out, want)
		}
	}
	if run, _ := st.GetRun(testCtx(t, 5*time.Second), "long"); run.State != storage.StateStopped {
		t.Fatalf("the running run after the drain: %s", run.State)
	}
	cli(t, r, ns, "group", "delete", "nightly")
	if _, stderr, code := RunCLIErr(t, "--redis", r.URL(), "-n", ns, "group", "pause", "nightly"); code != 2 || !strings.Contains(stderr, "nightly") {
		t.Fatalf("pause of a deleted group: exit %d %q", code, stderr)
	}
}
