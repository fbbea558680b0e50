package tests

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestDeepPriorityGroup: a priority group 100,000 runs deep in one
// namespace beside a normal namespace on the same redis-server, each with
// its own `serve` and `worker` processes. While the deep group fills and
// drains: the normal namespace's leader keeps its lease (one term, no
// "lost leadership") and its runs keep starting (submit -> RUNNING from the
// runs' Redis timestamps: median within 50 ms); the newest run of the deep
// group launches within 1 s of its submit; everything older ends DISCARDED or
// STOPPED, none of them launched after a newer one was, and no run is
// executed twice (worker journals).
func TestDeepPriorityGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 runs")
	}
	// not parallel: its latency figures are the point
	r := redistest.Start(t)
	ctx := testCtx(t, 4*time.Minute)
	deep, normal := Store(t, r, "deep"), Store(t, r, "normal")
	hostN := RuntimeHost(t, "host-normal", r, "normal", "127.0.0.1:7911")
	hostD := RuntimeHost(t, "host-deep", r, "deep", "127.0.0.1:7912")
	hostN.WaitLog(t, 10*time.Second, "became leader")
	hostD.WaitLog(t, 10*time.Second, "became leader")
	_, jn := StartWorker(t, "w-normal", r, "normal", "127.0.0.1:7921", 4)
	_, jd := StartWorker(t, "w-deep", r, "deep", "127.0.0.1:7922", 4)
	leaderN := Leader(t, r, "normal")
	// warm up: the host loads (compiles) a policy on its first decision
	if _, err := normal.Submit(ctx, storage.SubmitRequest{Group: "n", ID: "warm-up"}); err != nil {
		t.Fatal(err)
	}
	WaitRunState(t, normal, "warm-up", 30*time.Second, storage.StateSucceeded)
	if _, err := deep.SetGroup(ctx, "p", "priority", 1); err != nil {
		t.Fatal(err)
	}

	// The normal namespace: a run every 50 ms for the whole test.
	var (
		mu      sync.Mutex
		normIDs []string
		stopN   = make(chan struct{})
		doneN   = make(chan struct{})
	)
	go func() {
		defer close(doneN)
		for i := 0; ; i++ {
			select {
			case <-stopN:
				return
			case <-time.After(50 * time.Millisecond):
			}
			run, err := normal.Submit(ctx, storage.SubmitRequest{Group: "n", ID: fmt.Sprintf("n%04d", i)})
			if err != nil {
				t.Errorf("normal submit: %v", err)
				return
			}
			mu.Lock()
			normIDs = append(normIDs, run.ID)
			mu.Unlock()
		}
	}()

	// Fill the deep group: 100,000 runs of 1 minute, 1,000 per pipeline,
	// while its host decides.
	const n = 100_000
	t0 := time.Now()
	for lo := 0; lo < n; lo += 1000 {
		batch := make([]storage.SubmitRequest, 0, 1000)
		for i := lo; i < lo+1000; i++ {
			batch = append(batch, storage.SubmitRequest{Group: "p", ID: fmt.Sprintf("d%06d", i), Duration: time.Minute})
		}
		for _, res := range deep.SubmitBatch(ctx, batch) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}
	t.Logf("submitted %d runs to the deep group in %v", n, time.Since(t0).Round(time.Millisecond))
	newest, err := deep.Submit(ctx, storage.SubmitRequest{Group: "p", ID: "newest", Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := WaitRunState(t, deep, "newest", 30*time.Second, storage.StateRunning)
	if got.LaunchedAt.IsZero() {
		t.Fatalf("newest run %+v has no launched_at", got)
	}
	toLaunch := got.LaunchedAt.Sub(newest.SubmittedAt)
	t.Logf("newest run: submit -> launched %v (Redis time)", toLaunch)
	if toLaunch > time.Second {
		t.Errorf("the newest run launched %v after its submit, want within 1s", toLaunch)
	}

	// Everything older ends DISCARDED or STOPPED.
	WaitFor(t, 2*time.Minute, "every older run of the deep group final", func() bool {
		g, err := deep.GetGroup(ctx, "p")
		if err != nil || g.Waiting != 0 || g.Active != 1 {
			return false
		}
		dg, err := deep.DrainGroups(ctx, 1)
		return err == nil && len(dg) == 0
	})
	close(stopN)
	<-doneN

	ids := make([]string, 0, n)
	for i := range n {
		ids = append(ids, fmt.Sprintf("d%06d", i))
	}
	states := map[storage.State]int{}
	var lastLaunched string
	for lo := 0; lo < n; lo += 5000 {
		runs, err := deep.GetRuns(ctx, ids[lo:min(lo+5000, n)])
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range runs {
			states[run.State]++
			if run.State != storage.StateDiscarded && run.State != storage.StateStopped {
				t.Errorf("run %s is %s, want DISCARDED or STOPPED", run.ID, run.State)
			}
			if !run.LaunchedAt.IsZero() {
				lastLaunched = run.ID
			}
		}
	}
	t.Logf("deep group: %v, last older run launched: %q", states, lastLaunched)
	if r, err := deep.GetRun(ctx, "newest"); err != nil || r.State != storage.StateRunning {
		t.Errorf("newest: %v %v, want RUNNING", r.State, err)
	}
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"w-deep": jd, "w-normal": jn}))
	for run, e := range ex {
		if len(e) > 1 {
			t.Errorf("run %s executed %d times: %v", run, len(e), e)
		}
	}

	// The normal namespace: one term all along, and its runs started.
	if l := Leader(t, r, "normal"); l.Epoch != leaderN.Epoch || l.Identity != leaderN.Identity {
		t.Errorf("normal namespace leader went from %s epoch %d to %s epoch %d", leaderN.Identity, leaderN.Epoch, l.Identity, l.Epoch)
	}
	if lost := hostN.LogsMatching("lost leadership"); len(lost) > 0 {
		t.Errorf("the normal namespace's leader lost its lease: %v", lost)
	}
	mu.Lock()
	nids := slices.Clone(normIDs)
	mu.Unlock()
	all := WaitAllFinal(t, normal, 30*time.Second)
	var lat []time.Duration
	for _, id := range nids {
		run := all[id]
		if run.State != storage.StateSucceeded || run.StartedAt.IsZero() {
			t.Errorf("normal run %s: %s", id, run.State)
			continue
		}
		lat = append(lat, run.StartedAt.Sub(run.SubmittedAt))
		if d := run.StartedAt.Sub(run.SubmittedAt); d > 50*time.Millisecond {
			t.Logf("normal run %s: submitted %s, launched +%v, running +%v", id, run.SubmittedAt.Format("15:04:05.000"),
				run.LaunchedAt.Sub(run.SubmittedAt), d)
		}
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no normal runs")
	}
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("normal namespace: %d runs, submit -> RUNNING p50 %v, p99 %v, max %v (Redis ms)", len(lat), p(0.5), p(0.99), lat[len(lat)-1])
	// Timing on a shared machine: the median is held to the 50 ms the
	// issue names (measured ~10 ms); the tail only to a quarter of the
	// lease TTL (measured ~25 ms): a script that held Redis for a depth-
	// proportional time (289 ms at 50,000 before windows) breaks both.
	if p(0.5) > 50*time.Millisecond || p(0.99) > rtLeaseTTL/4 {
		t.Errorf("normal namespace: submit -> RUNNING p50 %v (want <= 50ms), p99 %v (want <= %v) while the deep group drained",
			p(0.5), p(0.99), rtLeaseTTL/4)
	}
}
