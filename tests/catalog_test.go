package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// The catalog of strategies (examples/*, ABI v4) end to end: each policy
// pushed to a real serve host with a simulating worker, on its own
// redis-server, and the outcome its peer feature promises checked in the
// runs' states and times (Redis time).

var catalog = []string{"debounce", "throttle", "rate-limit", "cancel-in-progress", "bounded-queue", "singleton", "round-robin", "priority-aging",
	"zone-spread"}

// TestCatalog_committed: every example's committed .wasm is what the
// build of its main.go's generate line writes (byte for byte), and passes its scenarios
// (`policy test`, exit 0).
func TestCatalog_committed(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	// the builds two at a time (each mostly one core: the link)
	built := make([]error, len(catalog))
	if !testing.Short() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 2)
		for i, n := range catalog {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o",
					filepath.Join(out, n+".wasm"), ".")
				cmd.Dir, cmd.Env = filepath.Join("..", "examples", n), append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
				if b, err := cmd.CombinedOutput(); err != nil {
					built[i] = fmt.Errorf("%v\n%s", err, b)
				}
			}()
		}
		wg.Wait()
	}
	for i, n := range catalog {
		src := filepath.Join("..", "examples", n)
		if !testing.Short() {
			if built[i] != nil {
				t.Fatalf("build %s: %v", n, built[i])
			}
			a, _ := os.ReadFile(filepath.Join(out, n+".wasm"))
			c, err := os.ReadFile(filepath.Join(src, n+".wasm"))
			if err != nil || !bytes.Equal(a, c) {
				t.Errorf("examples/%s/%s.wasm is stale or missing (%v): run go generate ./examples/...", n, n, err)
			}
		}
		o, code := RunCLI(t, "policy", "test", filepath.Join(src, n+".wasm"), filepath.Join(src, "scenarios"))
		if code != 0 {
			t.Errorf("policy test %s: exit %d\n%s", n, code, o)
		}
	}
}

// TestCatalog_assemblyscript: the catalog examples written in
// AssemblyScript too (examples/NAME/assemblyscript) build with `policy
// build` to their committed .wasm, byte for byte, and pass the example's
// scenarios as the Go version does.
func TestCatalog_assemblyscript(t *testing.T) {
	t.Parallel()
	asc, _ := filepath.Abs(filepath.Join("..", "abi", "assemblyscript", "node_modules", ".bin", "asc"))
	if _, err := os.Stat(asc); err != nil {
		t.Fatalf("the AssemblyScript compiler is missing (scripts/test installs it: npm ci in abi/assemblyscript): %v", err)
	}
	for _, n := range []string{"debounce"} {
		src := filepath.Join("..", "examples", n, "assemblyscript")
		out := filepath.Join(t.TempDir(), n+".wasm")
		if o, code := RunCLI(t, "policy", "build", src, "--asc", asc, "--out", out); code != 0 {
			t.Fatalf("policy build %s: exit %d\n%s", src, code, o)
		}
		a, _ := os.ReadFile(out)
		c, err := os.ReadFile(filepath.Join(src, n+".wasm"))
		if err != nil || !bytes.Equal(a, c) {
			t.Errorf("examples/%s/assemblyscript/%s.wasm is stale or missing (%v): rebuild it with policy build", n, n, err)
		}
		if o, code := RunCLI(t, "policy", "test", filepath.Join(src, n+".wasm"), filepath.Join("..", "examples", n, "scenarios")); code != 0 {
			t.Errorf("policy test %s (AssemblyScript): exit %d\n%s", n, code, o)
		}
	}
}

// catalogHost starts redis, a serve host and a simulating worker, pushes
// example name as policy name, and sets group g to it with params.
func catalogHost(t *testing.T, ns, name string, maxActive int, params ...string) (*redistest.Server, *client.Client) {
	t.Helper()
	r := redistest.Start(t)
	port := 7600 + 10*slices.Index(catalog, name)
	RuntimeHost(t, "host", r, ns, fmt.Sprintf("127.0.0.1:%d", port))
	StartWorker(t, "w", r, ns, fmt.Sprintf("127.0.0.1:%d", port+1), 10)
	cli(t, r, ns, "policy", "push", name, filepath.Join("..", "examples", name, name+".wasm"))
	args := []string{"group", "set", "g", "--policy", name, "--max-active", fmt.Sprint(maxActive)}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	cli(t, r, ns, args...)
	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

func submitL(t *testing.T, c *client.Client, id string, d time.Duration, labels ...string) client.Run {
	t.Helper()
	o := client.SubmitOptions{ID: id, Duration: d, Priority: 0}
	for i := 0; i+1 < len(labels); i += 2 {
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[labels[i]] = labels[i+1]
	}
	run, err := c.Submit(testCtx(t, 5*time.Second), "g", o)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// waitFinal waits until every named run is final and returns them.
func waitFinal(t *testing.T, c *client.Client, d time.Duration, ids ...string) map[string]client.Run {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := map[string]client.Run{}
		for _, id := range ids {
			r, err := c.Get(testCtx(t, 5*time.Second), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.FinishedAt != nil {
				out[id] = r
			}
		}
		if len(out) == len(ids) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not final after %v: %d of %d are", d, len(out), len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func states(rs map[string]client.Run) map[string]string {
	out := map[string]string{}
	for id, r := range rs {
		out[id] = r.State
	}
	return out
}

// TestCatalog_debounce: a burst of 10 submits launches once, the newest,
// the nine others DISCARDED, no earlier than the quiet period after the
// last submit; a steady stream (a submit every 200 ms, never quiet for the
// period) still launches within its maximum wait, while it goes on.
func TestCatalog_debounce(t *testing.T) {
	t.Parallel()
	_, c := catalogHost(t, "debounce", "debounce", 1, "period=1500ms", "max_wait=2s")
	var ids []string
	var last client.Run
	for i := range 10 {
		id := fmt.Sprintf("b%d", i)
		last = submitL(t, c, id, 0)
		ids = append(ids, id)
		time.Sleep(50 * time.Millisecond)
	}
	rs := waitFinal(t, c, 20*time.Second, ids...)
	for i, id := range ids {
		want := "DISCARDED"
		if i == len(ids)-1 {
			want = "SUCCEEDED"
		}
		if rs[id].State != want {
			t.Fatalf("burst: %v; want only the newest SUCCEEDED", states(rs))
		}
	}
	if got := rs[last.ID].StartedAt.Sub(*last.SubmittedAt); got < 1500*time.Millisecond {
		t.Fatalf("the newest started %v after the last submit, before the quiet period of 1.5s", got)
	}
	// a steady stream: 6 s of submits every 200 ms, max_wait 2 s
	var stream []string
	var firstStart *time.Time
	end := time.Now().Add(6 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		id := fmt.Sprintf("s%d", i)
		submitL(t, c, id, 0)
		stream = append(stream, id)
		time.Sleep(200 * time.Millisecond)
	}
	lastSubmit := time.Now()
	rs = waitFinal(t, c, 20*time.Second, stream...)
	succeeded := 0
	for _, id := range stream {
		if r := rs[id]; r.State == "SUCCEEDED" {
			succeeded++
			if firstStart == nil || r.StartedAt.Before(*firstStart) {
				firstStart = r.StartedAt
			}
		}
	}
	if succeeded == 0 || !firstStart.Before(lastSubmit) {
		t.Fatalf("steady stream: %d launched, first at %v, the stream ended %v: want a launch while it went on (max_wait)", succeeded, firstStart, lastSubmit)
	}
	t.Logf("steady stream of %d runs: %d launched", len(stream), succeeded)
}

// TestCatalog_throttle: at most limit runs start in any period (their
// started_at, Redis time), the others wait and all run in the end.
func TestCatalog_throttle(t *testing.T) {
	t.Parallel()
	_, c := catalogHost(t, "throttle", "throttle", 10, "limit=2", "period=1s")
	var ids []string
	for i := range 8 {
		ids = append(ids, submitL(t, c, fmt.Sprintf("t%d", i), 0).ID)
	}
	rs := waitFinal(t, c, 30*time.Second, ids...)
	var starts []time.Time
	for _, r := range rs {
		if r.State != "SUCCEEDED" {
			t.Fatalf("throttle: %v; want all SUCCEEDED", states(rs))
		}
		starts = append(starts, *r.StartedAt)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	for i := 0; i+2 < len(starts); i++ {
		if gap := starts[i+2].Sub(starts[i]); gap < time.Second {
			t.Fatalf("3 runs started within %v (limit 2 per 1s): %v", gap, starts)
		}
	}
}

// TestCatalog_keys: the other strategies of the catalog, each on its own
// host: the runs' final states (and order) are the peer feature's.
func TestCatalog_keys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		max    int
		params []string
		run    func(t *testing.T, r *redistest.Server, c *client.Client)
	}{
		{"rate-limit", 10, []string{"limit=2", "period=1m"}, func(t *testing.T, r *redistest.Server, c *client.Client) {
			cli(t, r, "rate-limit", "group", "pause", "g")
			for i := range 5 {
				submitL(t, c, fmt.Sprintf("r%d", i), 0)
			}
			cli(t, r, "rate-limit", "group", "resume", "g")
			rs := waitFinal(t, c, 20*time.Second, "r0", "r1", "r2", "r3", "r4")
			want := map[string]string{"r0": "SUCCEEDED", "r1": "SUCCEEDED", "r2": "DISCARDED", "r3": "DISCARDED", "r4": "DISCARDED"}
			if got := states(rs); !mapsEqual(got, want) {
				t.Fatalf("rate-limit: %v, want %v", got, want)
			}
		}},
		{"cancel-in-progress", 2, nil, func(t *testing.T, r *redistest.Server, c *client.Client) {
			submitL(t, c, "main1", time.Minute, "ref", "main")
			submitL(t, c, "dev1", time.Minute, "ref", "dev")
			waitState(t, c, "main1", "RUNNING")
			waitState(t, c, "dev1", "RUNNING")
			submitL(t, c, "main2", 0, "ref", "main")
			rs := waitFinal(t, c, 20*time.Second, "main1", "main2")
			if rs["main1"].State != "STOPPED" || rs["main2"].State != "SUCCEEDED" {
				t.Fatalf("cancel-in-progress: %v, want main1 STOPPED, main2 SUCCEEDED", states(rs))
			}
			if d, _ := c.Get(testCtx(t, 5*time.Second), "dev1"); d.State != "RUNNING" {
				t.Fatalf("dev1 (another ref) is %s, want RUNNING beside", d.State)
			}
		}},
		{"bounded-queue", 1, []string{"max_waiting=1"}, func(t *testing.T, r *redistest.Server, c *client.Client) {
			submitL(t, c, "q1", 2*time.Second)
			waitState(t, c, "q1", "RUNNING")
			for _, id := range []string{"q2", "q3", "q4"} {
				submitL(t, c, id, 0)
			}
			rs := waitFinal(t, c, 20*time.Second, "q1", "q2", "q3", "q4")
			want := map[string]string{"q1": "SUCCEEDED", "q2": "DISCARDED", "q3": "DISCARDED", "q4": "SUCCEEDED"}
			if got := states(rs); !mapsEqual(got, want) {
				t.Fatalf("bounded-queue: %v, want %v", got, want)
			}
		}},
		{"singleton", 5, nil, func(t *testing.T, r *redistest.Server, c *client.Client) {
			submitL(t, c, "x1", 2*time.Second, "key", "x")
			waitState(t, c, "x1", "RUNNING")
			submitL(t, c, "x2", 0, "key", "x")
			submitL(t, c, "y1", 0, "key", "y")
			rs := waitFinal(t, c, 20*time.Second, "x1", "x2", "y1")
			want := map[string]string{"x1": "SUCCEEDED", "x2": "DISCARDED", "y1": "SUCCEEDED"}
			if got := states(rs); !mapsEqual(got, want) {
				t.Fatalf("singleton: %v, want %v", got, want)
			}
		}},
		{"round-robin", 1, nil, func(t *testing.T, r *redistest.Server, c *client.Client) {
			cli(t, r, "round-robin", "group", "pause", "g")
			for _, s := range [][2]string{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"c1", "c"}} {
				submitL(t, c, s[0], 0, "tenant", s[1])
			}
			cli(t, r, "round-robin", "group", "resume", "g")
			rs := waitFinal(t, c, 20*time.Second, "a1", "a2", "a3", "b1", "c1")
			if got, want := byStart(rs), []string{"a1", "b1", "c1", "a2", "a3"}; !slices.Equal(got, want) {
				t.Fatalf("round-robin started %v, want %v", got, want)
			}
		}},
		{"priority-aging", 1, []string{"age_step=1h"}, func(t *testing.T, r *redistest.Server, c *client.Client) {
			cli(t, r, "priority-aging", "group", "pause", "g")
			for i, p := range []int{0, 5, 1} {
				if _, err := c.Submit(testCtx(t, 5*time.Second), "g", client.SubmitOptions{ID: fmt.Sprintf("p%d", i), Priority: p}); err != nil {
					t.Fatal(err)
				}
			}
			cli(t, r, "priority-aging", "group", "resume", "g")
			rs := waitFinal(t, c, 20*time.Second, "p0", "p1", "p2")
			if got, want := byStart(rs), []string{"p1", "p2", "p0"}; !slices.Equal(got, want) {
				t.Fatalf("priority-aging started %v, want %v", got, want)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, c := catalogHost(t, tc.name, tc.name, tc.max, tc.params...)
			tc.run(t, r, c)
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// byStart is the runs' ids by started_at (then seq).
func byStart(rs map[string]client.Run) []string {
	var out []string
	for id := range rs {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := rs[out[i]], rs[out[j]]
		if !a.StartedAt.Equal(*b.StartedAt) {
			return a.StartedAt.Before(*b.StartedAt)
		}
		return a.Seq < b.Seq
	})
	return out
}

func waitState(t *testing.T, c *client.Client, id, state string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := c.Get(testCtx(t, 5*time.Second), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 15s, want %s", id, r.State, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWake_failover: a wake set by a leader's decision (debounce, quiet
// period 4s) fires on the standby after kill -9 of that leader: the run
// launches under the standby's term, no earlier than the quiet period,
// with nothing else happening to the group.
func TestWake_failover(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "wakefail"
	st := Store(t, r, ns)
	a := Serve(t, "a", r, ns, "127.0.0.1:7681", rtLeaseTTL)
	aid := a.Identity(t)
	b := Serve(t, "b", r, ns, "127.0.0.1:7682", rtLeaseTTL)
	b.Identity(t)
	StartWorker(t, "w", r, ns, "127.0.0.1:7683", 2)
	cli(t, r, ns, "policy", "push", "debounce", "../examples/debounce/debounce.wasm")
	cli(t, r, ns, "group", "set", "g", "--policy", "debounce", "--param", "period=4s")
	if l := Leader(t, r, ns); l.Identity != aid {
		t.Fatalf("leader %s, want a (%s)", l.Identity, aid)
	}
	epochA := Leader(t, r, ns).Epoch
	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	run := submitL(t, c, "late", 0)
	// the leader decided: nothing launched, a wake pending in Redis
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, err := st.GetGroup(testCtx(t, 5*time.Second), "g")
		if err != nil {
			t.Fatal(err)
		}
		if !g.WakeAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no wake recorded for the group after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dirty := r.Client(t).SIsMember(context.Background(), keyspace.Of(st).Dirty(), "g").Val(); dirty {
		t.Fatal("the group is still dirty: the wake must be what decides it again")
	}
	if out := cli(t, r, ns, "run", "explain", "late"); !strings.Contains(out, "the policy asked to be woken at") &&
		time.Since(*run.SubmittedAt) < 3*time.Second { // (a loaded machine may be past the wake already)
		t.Fatalf("run explain of a run its policy waits on:\n%s", out)
	}
	a.Kill()
	got := waitFinal(t, c, 30*time.Second, "late")["late"]
	if got.State != "SUCCEEDED" || got.Decision == nil || got.Decision.Epoch <= epochA {
		t.Fatalf("after the leader's kill -9: %s, decision %+v; want SUCCEEDED under a later term than %d", got.State, got.Decision, epochA)
	}
	if d := got.StartedAt.Sub(*run.SubmittedAt); d < 4*time.Second {
		t.Fatalf("started %v after its submit, before the quiet period", d)
	}
}

// TestWake_minimumInterval: a policy that asks for a wake 1 ms ahead on
// every decision is held to abi.MinWakeInterval (100 ms): over a 3 s
// window its wakes number at most 3000/100 (plus one in flight).
func TestWake_minimumInterval(t *testing.T) {
	t.Parallel()
	wasm := filepath.Join(t.TempDir(), "wakeloop.wasm")
	o, code := RunCLI(t, "policy", "build", "./testdata/wakeloop", "--out", wasm)
	if code != 0 {
		t.Fatalf("policy build: exit %d: %s", code, o)
	}
	r := redistest.Start(t)
	const ns = "wakeloop"
	h := ServeAdmin(t, "host", r, ns, "127.0.0.1:7691")
	cli(t, r, ns, "policy", "push", "wakeloop", wasm)
	cli(t, r, ns, "group", "set", "g", "--policy", "wakeloop")
	wakes := func() float64 { return h.Metrics(t, "wasmsched_wakes_total", "namespace")[ns] }
	// wait for the first wake, then count over 3 s
	deadline := time.Now().Add(10 * time.Second)
	for wakes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no wake fired in 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	w0, t0 := wakes(), time.Now()
	time.Sleep(3 * time.Second)
	w1, el := wakes(), time.Since(t0)
	limit := float64(el.Milliseconds())/100 + 1
	if n := w1 - w0; n > limit || n < 2 {
		t.Fatalf("%v wakes in %v: want between 2 and %v (the 100 ms minimum interval)", n, el, limit)
	}
	t.Logf("%v wakes in %v", w1-w0, el)
}

// TestCatalog_readmes runs every catalog README's commands literally: the
// indented `wasmsched ...` lines of examples/*/README.md, through sh from
// the repository root with the built binary on PATH, against a namespace
// of its own with a host and a simulating worker running (as the READMEs
// say). Each must exit 0 (a README that sets a group's policy before it
// pushes it exits 2), and the run each README submits must end SUCCEEDED.
func TestCatalog_readmes(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readmes, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	if err != nil || len(readmes) < 8 {
		t.Fatalf("catalog READMEs: %v %v", readmes, err)
	}
	r := redistest.Start(t)
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(Binary(t), filepath.Join(bin, "wasmsched")); err != nil {
		t.Fatal(err)
	}
	for _, readme := range readmes {
		name := filepath.Base(filepath.Dir(readme))
		t.Run(name, func(t *testing.T) {
			t.Parallel() // (each in its own namespace, with its own host and worker)
			b, err := os.ReadFile(readme)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "    wasmsched ") {
					lines = append(lines, strings.TrimSpace(l))
				}
			}
			if len(lines) < 3 || !strings.HasPrefix(lines[0], "wasmsched policy push ") {
				t.Fatalf("%s: commands %q: want the push, the group set and a submit", readme, lines)
			}
			ns := "readme-" + name
			Serve(t, "host", r, ns, "127.0.0.1:7"+fmt.Sprint(600+len(name)), rtLeaseTTL)
			StartProc(t, "w0", "--redis", r.URL(), "-n", ns, "worker", "--simulate", "--slots", "2", "--advertise", "127.0.0.1:7599")
			env := append(cleanEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"WASMSCHED_REDIS="+r.URL(), "WASMSCHED_NAMESPACE="+ns)
			var runID string
			for _, line := range lines {
				cmd := exec.Command("sh", "-c", line+" -o json")
				cmd.Dir, cmd.Env = root, env
				out, err := cmd.Output()
				if err != nil {
					var stderr string
					if ee, ok := err.(*exec.ExitError); ok {
						stderr = string(ee.Stderr)
					}
					t.Fatalf("%s: %q: %v\n%s%s", readme, line, err, out, stderr)
				}
				if strings.HasPrefix(line, "wasmsched submit ") {
					var run struct{ ID string }
					if err := json.Unmarshal(out, &run); err != nil || run.ID == "" {
						t.Fatalf("%q printed %q", line, out)
					}
					runID = run.ID
				}
			}
			st := Store(t, r, ns)
			WaitFor(t, 60*time.Second, "the README's run to finish", func() bool {
				run, err := st.GetRun(context.Background(), runID)
				return err == nil && run.State.Final()
			})
			decidedBy := name
			if strings.Contains(strings.Join(lines, "\n"), "--allocate "+name) {
				// an allocation policy: the namespace allocates with it, and
				// the run (decided by its group's serial policy) got slots
				if a, err := st.Allocation(context.Background()); err != nil || a.Policy != name {
					t.Fatalf("%s: the namespace allocates with %q (%v), want %s", readme, a.Policy, err, name)
				}
				decidedBy = "wait"
			}
			if run, _ := st.GetRun(context.Background(), runID); run.State != storage.StateSucceeded || !strings.HasPrefix(run.Policy, decidedBy) {
				t.Fatalf("%s: the run %s is %s by policy %q (%s), want SUCCEEDED by %s", readme, runID, run.State, run.Policy, run.Reason, decidedBy)
			}
		})
	}
}
