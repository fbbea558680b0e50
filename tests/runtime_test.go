package tests

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestDevEndToEnd: `wasmsched dev` (the README's first command) starts the
// embedded store, a host and a simulated worker; runs submitted with the
// CLI against the URL it prints reach SUCCEEDED; Ctrl-C exits 0.
func TestDevEndToEnd(t *testing.T) {
	t.Parallel()
	p := StartProc(t, "dev", "dev", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0", "--slots", "4")
	line := p.WaitOut(t, 20*time.Second, "export WASMSCHED_REDIS=")
	url := strings.TrimSpace(line[strings.Index(line, "=")+1:])
	if !strings.HasPrefix(url, "redis://127.0.0.1:") {
		t.Fatalf("dev printed %q: want a loopback redis:// URL", line)
	}
	admin := p.WaitOut(t, time.Second, "admin server at http://")
	adminURL := strings.Fields(admin[strings.Index(admin, "http://"):])[0]
	ui := p.WaitOut(t, time.Second, "web UI at http://")
	uiURL := strings.Fields(ui[strings.Index(ui, "http://"):])[0]
	apiURL := strings.TrimSuffix(uiURL, "/ui/")

	ids := []string{"demo-1", "demo-2", "demo-3"}
	for _, id := range ids {
		out, code := RunCLI(t, "--redis", url, "submit", "demo", "--id", id, "--duration", "100ms")
		if code != 0 {
			t.Fatalf("submit %s: exit %d: %s", id, code, out)
		}
	}
	WaitFor(t, 30*time.Second, "the dev runs to succeed", func() bool {
		out, code := RunCLI(t, "--redis", url, "runs", "--group", "demo", "-o", "json")
		if code != 0 {
			return false
		}
		n := 0
		for _, id := range ids {
			if strings.Contains(out, `"id": "`+id+`"`) {
				n++
			}
		}
		return n == len(ids) && strings.Count(out, `"state": "SUCCEEDED"`) == len(ids)
	})
	// the API and the UI dev turned on: the same runs, open on loopback
	resp, err := http.Get(apiURL + "/api/v1/namespaces/default/runs?group=demo")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), `"state": "SUCCEEDED"`) != len(ids) {
		t.Fatalf("GET the runs from the dev API: %s %s", resp.Status, body)
	}
	if resp, err := http.Get(uiURL); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", uiURL, resp, err)
	} else {
		resp.Body.Close()
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(adminURL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	p.Signal(syscall.SIGINT)
	if code := p.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("dev exit code after SIGINT: %d, want 0", code)
	}
}

// strategyEnv is one namespace with one host and one 4-slot simulated worker.
type strategyEnv struct {
	r       *redistest.Server
	ns      string
	st      *storage.Store
	journal string
}

func newStrategyEnv(t *testing.T) *strategyEnv {
	r := redistest.Start(t)
	e := &strategyEnv{r: r, ns: "strat", st: Store(t, r, "strat")}
	RuntimeHost(t, "host", r, e.ns, "127.0.0.1:7501")
	_, e.journal = StartWorker(t, "worker", r, e.ns, "127.0.0.1:7601", 4)
	return e
}

// finish waits until every run is final, checks that every run was
// executed at most once (once if it ran to an outcome, never if it was
// discarded) and that every slot is free again; it returns the runs of
// group.
func (e *strategyEnv) finish(t *testing.T, group string) map[string]storage.Run {
	t.Helper()
	all := WaitAllFinal(t, e.st, 60*time.Second)
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"worker": e.journal}))
	for id, r := range all {
		n := len(ex[id])
		switch {
		case n > 1:
			t.Errorf("run %s executed %d times: %v", id, n, ex[id])
		case r.State == storage.StateDiscarded && n != 0:
			t.Errorf("run %s DISCARDED but executed", id)
		case r.State == storage.StateSucceeded && n != 1:
			t.Errorf("run %s SUCCEEDED with %d executions", id, n)
		}
	}
	WaitFor(t, 20*time.Second, "all 4 slots free", func() bool {
		s := Slots(t, e.r, e.ns)
		return s.Free == 4 && s.Assigned == 0
	})
	out := map[string]storage.Run{}
	for id, r := range all {
		if r.Group == group {
			out[id] = r
		}
	}
	return out
}

func bySeq(rs map[string]storage.Run) []storage.Run {
	out := make([]storage.Run, 0, len(rs))
	for _, r := range rs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b storage.Run) int { return int(a.Seq - b.Seq) })
	return out
}

func wantStates(t *testing.T, rs map[string]storage.Run, want map[string][]storage.State) {
	t.Helper()
	for id, states := range want {
		r, ok := rs[id]
		if !ok {
			t.Errorf("run %s missing", id)
			continue
		}
		if !slices.Contains(states, r.State) {
			t.Errorf("run %s: state %s (reason %q), want one of %v", id, r.State, r.Reason, states)
		}
	}
}

// maxOverlap is the largest number of runs whose [started, finished)
// intervals overlap (Redis ms timestamps).
func maxOverlap(rs []storage.Run) int {
	best := 0
	for _, a := range rs {
		if a.StartedAt.IsZero() {
			continue
		}
		n := 0
		for _, b := range rs {
			if !b.StartedAt.IsZero() && !b.StartedAt.After(a.StartedAt) && b.FinishedAt.After(a.StartedAt) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// TestStrategiesEndToEnd runs the three serial strategies through a real
// host (`serve`), a simulated worker (`worker --simulate --journal`) and
// the CLI.
func TestStrategiesEndToEnd(t *testing.T) {
	t.Parallel()
	e := newStrategyEnv(t)
	ok := func(s ...storage.State) []storage.State { return s }

	t.Run("wait", func(t *testing.T) {
		SetGroup(t, e.r, e.ns, "serial", "wait", 1)
		sampler := SampleActive(t, e.st, "serial")
		var ids []string
		for i := range 5 {
			ids = append(ids, Submit(t, e.r, e.ns, "serial", fmt.Sprintf("serial-%d", i), "--duration", "150ms"))
		}
		rs := e.finish(t, "serial")
		sampler.Stop()
		want := map[string][]storage.State{}
		for _, id := range ids {
			want[id] = ok(storage.StateSucceeded)
		}
		wantStates(t, rs, want)
		if m, at := sampler.Max(); m > 1 {
			t.Errorf("wait max_active 1: %d runs active at once: %v", m, at)
		}
		seq := bySeq(rs)
		for i := 1; i < len(seq); i++ {
			if seq[i].StartedAt.Before(seq[i-1].FinishedAt) {
				t.Errorf("run %s (seq %d) started at %v before run %s (seq %d) finished at %v",
					seq[i].ID, seq[i].Seq, seq[i].StartedAt, seq[i-1].ID, seq[i-1].Seq, seq[i-1].FinishedAt)
			}
		}
	})

	t.Run("wait-max-active-2", func(t *testing.T) {
		SetGroup(t, e.r, e.ns, "pair", "wait", 2)
		sampler := SampleActive(t, e.st, "pair")
		for i := range 6 {
			Submit(t, e.r, e.ns, "pair", fmt.Sprintf("pair-%d", i), "--duration", "300ms")
		}
		rs := e.finish(t, "pair")
		sampler.Stop()
		for id, r := range rs {
			if r.State != storage.StateSucceeded {
				t.Errorf("run %s: %s, want SUCCEEDED", id, r.State)
			}
		}
		m, at := sampler.Max()
		if m > 2 {
			t.Errorf("wait max_active 2: %d runs active at once: %v", m, at)
		}
		seq := bySeq(rs)
		if o := maxOverlap(seq); o > 2 {
			t.Errorf("wait max_active 2: %d runs ran at once (by their timestamps)", o)
		}
		for i := 1; i < len(seq); i++ {
			if seq[i].StartedAt.Before(seq[i-1].StartedAt) {
				t.Errorf("run %s (seq %d) started before run %s (seq %d)", seq[i].ID, seq[i].Seq, seq[i-1].ID, seq[i-1].Seq)
			}
		}
		t.Logf("wait max_active 2: at most %d active in the samples, %d overlapping by timestamps", m, maxOverlap(seq))
	})

	t.Run("discard", func(t *testing.T) {
		SetGroup(t, e.r, e.ns, "excl", "discard", 1)
		sampler := SampleActive(t, e.st, "excl")
		Submit(t, e.r, e.ns, "excl", "excl-1", "--duration", "2s")
		Submit(t, e.r, e.ns, "excl", "excl-2", "--duration", "10ms")
		Submit(t, e.r, e.ns, "excl", "excl-3", "--duration", "10ms")
		WaitRunState(t, e.st, "excl-1", 10*time.Second, storage.StateRunning)
		// A submission while one runs is discarded.
		Submit(t, e.r, e.ns, "excl", "excl-4", "--duration", "10ms")
		d := WaitRunState(t, e.st, "excl-4", 10*time.Second, storage.StateDiscarded, storage.StateRunning, storage.StateSucceeded)
		if d.State != storage.StateDiscarded {
			t.Fatalf("excl-4 submitted while excl-1 runs: %s, want DISCARDED", d.State)
		}
		if r, _ := e.st.GetRun(testCtx(t, 5*time.Second), "excl-1"); r.State.Final() {
			t.Fatalf("excl-1 finished before excl-4 was discarded; the test did not observe a discard while running")
		}
		WaitRunState(t, e.st, "excl-1", 15*time.Second, storage.StateSucceeded)
		// Nothing active any more: the next submission runs.
		Submit(t, e.r, e.ns, "excl", "excl-5", "--duration", "10ms")
		rs := e.finish(t, "excl")
		sampler.Stop()
		wantStates(t, rs, map[string][]storage.State{
			"excl-1": ok(storage.StateSucceeded),
			"excl-2": ok(storage.StateDiscarded),
			"excl-3": ok(storage.StateDiscarded),
			"excl-4": ok(storage.StateDiscarded),
			"excl-5": ok(storage.StateSucceeded),
		})
		if m, at := sampler.Max(); m > 1 {
			t.Errorf("discard: %d runs active at once: %v", m, at)
		}
	})

	t.Run("priority", func(t *testing.T) {
		SetGroup(t, e.r, e.ns, "latest", "priority", 1)
		Submit(t, e.r, e.ns, "latest", "latest-1", "--duration", "60s")
		WaitRunState(t, e.st, "latest-1", 10*time.Second, storage.StateRunning)
		Submit(t, e.r, e.ns, "latest", "latest-2", "--duration", "60s")
		Submit(t, e.r, e.ns, "latest", "latest-3", "--duration", "200ms")
		rs := e.finish(t, "latest")
		// latest-2 is either discarded (seen WAITING next to latest-3) or
		// launched alone first and then stopped for latest-3.
		wantStates(t, rs, map[string][]storage.State{
			"latest-1": ok(storage.StateStopped),
			"latest-2": ok(storage.StateDiscarded, storage.StateStopped),
			"latest-3": ok(storage.StateSucceeded),
		})
		t.Logf("priority: latest-2 ended %s (%s)", rs["latest-2"].State, rs["latest-2"].Reason)
	})

	// The CLI agrees: every run final, none LAUNCHED or RUNNING.
	for id, r := range Runs(t, e.r, e.ns, "") {
		if !storage.State(r.State).Final() {
			t.Errorf("runs -o json: %s is %s at the end", id, r.State)
		}
	}
}
