package tests

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestHostilePolicyLive: a real serve host with a good group and three
// groups whose pushed policy passed the push gate and turns hostile on
// live snapshots (it loops forever; it runs straight-line memory.fill of
// its whole memory; it claims 1.67M actions), auto-rollback off so the
// hostility lasts. Throughout: every good run starts and /healthz always
// answers (the bounds are hang detectors, 5 s and 2 s: these machines are
// shared, so the test logs the medians and maxima rather than asserting a
// latency), the host's RSS stays under 512 MiB; the bad groups' runs stay
// WAITING and nothing is lost.
func TestHostilePolicyLive(t *testing.T) {
	const (
		ns       = "hostile"
		window   = 10 * time.Second
		maxStart = 5 * time.Second
		maxRSS   = 512 << 10 // KiB
		maxProbe = 2 * time.Second
	)
	r := redistest.Start(t)
	st := Store(t, r, ns)
	cli(t, r, ns, "policy", "push", "turncoat", "../policies/testdata/hostile/turncoat.wasm")
	SetGroup(t, r, ns, "good", "wait", 1)
	bad := map[string]int{"bad-loop": 1, "bad-fill": 2, "bad-amplify": 3}
	for g, mode := range bad {
		SetGroup(t, r, ns, g, "turncoat", mode)
	}
	h := ServeAdmin(t, "host", r, ns, "127.0.0.1:7301", "--rollback-after", "0")
	h.WaitLog(t, 10*time.Second, "became leader")
	StartWorker(t, "w1", r, ns, "127.0.0.1:7302", 8)
	ctx := testCtx(t, 2*time.Minute)
	// Warm up: the first decision of the good group compiles the built-in
	// (a second or more with a cold compilation cache).
	if _, err := st.Submit(ctx, storage.SubmitRequest{Group: "good", ID: "warm-up", Duration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	WaitRunState(t, st, "warm-up", 30*time.Second, storage.StateSucceeded)
	var badRuns []string
	for g := range bad {
		for i := range 3 {
			id := fmt.Sprintf("%s-%d", g, i)
			if _, err := st.Submit(ctx, storage.SubmitRequest{Group: g, ID: id, Duration: 10 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			badRuns = append(badRuns, id)
		}
	}

	// Probes, every 50 ms for the whole window: /healthz and RSS.
	var (
		mu      sync.Mutex
		probes  []time.Duration
		probeKO []string
		maxKiB  int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := http.Client{Timeout: 2 * maxProbe}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			resp, err := hc.Get(h.URL + "/healthz")
			el := time.Since(t0)
			kib := RSSKiB(t, h.Pid())
			mu.Lock()
			probes = append(probes, el)
			if err != nil || resp.StatusCode != http.StatusOK {
				probeKO = append(probeKO, fmt.Sprintf("%v after %v", err, el))
			}
			maxKiB = max(maxKiB, kib)
			mu.Unlock()
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()

	// The good group: a run every 200 ms, each timed from submit to RUNNING.
	var starts []time.Duration
	var goodRuns []string
	deadline := time.Now().Add(window)
	for i := 0; time.Now().Before(deadline); i++ {
		id := fmt.Sprintf("good-%03d", i)
		t0 := time.Now()
		if _, err := st.Submit(ctx, storage.SubmitRequest{Group: "good", ID: id, Duration: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		goodRuns = append(goodRuns, id)
		for {
			run, err := st.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if run.State != storage.StateWaiting && run.State != storage.StateLaunched {
				el := time.Since(t0)
				if el > 200*time.Millisecond {
					t.Logf("%s started %v after its submit", id, el)
				}
				starts = append(starts, el)
				break
			}
			if time.Since(t0) > 10*time.Second {
				t.Fatalf("%s still %s after 10 s", id, run.State)
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(probes, func(i, j int) bool { return probes[i] < probes[j] })
	t.Logf("%d good runs: start median %v, max %v; %d /healthz probes: median %v, max %v; max RSS %d MiB",
		len(starts), starts[len(starts)/2], starts[len(starts)-1], len(probes), probes[len(probes)/2], probes[len(probes)-1], maxKiB>>10)
	if worst := starts[len(starts)-1]; worst > maxStart {
		t.Errorf("a good run started %v after its submit, bound %v", worst, maxStart)
	}
	if len(probeKO) > 0 {
		t.Errorf("/healthz failed: %v", probeKO)
	}
	if worst := probes[len(probes)-1]; worst > maxProbe {
		t.Errorf("/healthz answered after %v, bound %v", worst, maxProbe)
	}
	if maxKiB > maxRSS {
		t.Errorf("host RSS reached %d MiB, bound %d MiB", maxKiB>>10, maxRSS>>10)
	}
	// The bad groups' runs never moved; every good run finishes.
	for _, id := range badRuns {
		if run, err := st.GetRun(ctx, id); err != nil || run.State != storage.StateWaiting {
			t.Errorf("%s: %v %v, want WAITING", id, run.State, err)
		}
	}
	for _, id := range goodRuns {
		WaitRunState(t, st, id, 10*time.Second, storage.StateSucceeded)
	}
	// The host saw each kind of hostility (the metrics count by outcome).
	out := h.Metrics(t, "wasmsched_decisions_total", "outcome")
	if out["timeout"] == 0 || out["invalid"] == 0 {
		t.Errorf("decision outcomes %v: want timeouts and invalid decisions counted", out)
	}
}
