package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// placementEnv starts redis, hosts serve processes (ports from base), a
// CPU worker and a GPU worker (--label gpu=yes, 2 slots each), and groups
// train (requires gpu=yes) and plain.
func placementEnv(t *testing.T, ns string, base, hosts int) (*redistest.Server, *hostSet, *Proc, map[string]string, *client.Client) {
	t.Helper()
	r := redistest.Start(t)
	hs := &hostSet{procs: map[string]*Proc{}}
	for i := range hosts {
		hs.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", i), r, ns, fmt.Sprintf("127.0.0.1:%d", base+i)))
	}
	_, cpuJ := StartWorker(t, "cpu", r, ns, fmt.Sprintf("127.0.0.1:%d", base+hosts), 2)
	gpu, gpuJ := StartWorker(t, "gpu", r, ns, fmt.Sprintf("127.0.0.1:%d", base+hosts+1), 2, "--label", "gpu=yes")
	cli(t, r, ns, "group", "set", "train", "--max-active", "10", "--require", "gpu=yes")
	cli(t, r, ns, "group", "set", "plain", "--max-active", "10")
	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	return r, hs, gpu, map[string]string{"cpu": cpuJ, "gpu": gpuJ}, c
}

// TestPlacement_endToEnd, on real processes: a group that requires
// gpu=yes runs only on the worker with that label, an unconstrained group
// runs too; after kill -9 of the GPU worker the GPU runs wait and the
// others go on; a new GPU worker picks them up, none executed twice. A
// library worker with a handler for group a only never receives a run of
// group b.
func TestPlacement_endToEnd(t *testing.T) {
	const ns = "place"
	r, _, gpu, journals, c := placementEnv(t, ns, 7811, 1)
	submit := func(group, prefix string, n int) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s%02d", prefix, i)
			if _, err := c.Submit(testCtx(t, 5*time.Second), group, client.SubmitOptions{ID: id, Duration: 100 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	check := func(rs map[string]client.Run, where map[string]bool, what string) {
		t.Helper()
		byRun := ExecutionsByRun(ReadJournals(t, journals))
		for id, run := range rs {
			if run.State != "SUCCEEDED" {
				t.Errorf("%s %s: %s (%s), want SUCCEEDED", what, id, run.State, run.Reason)
			}
			ex := byRun[id]
			if len(ex) != 1 {
				t.Errorf("%s %s executed %d times: %+v", what, id, len(ex), ex)
			}
			for _, e := range ex {
				if where != nil && !where[e.Worker] {
					t.Errorf("%s %s ran on %s, want one of %v", what, id, e.Worker, where)
				}
			}
		}
	}

	// 1: train only on gpu; plain anywhere
	train, plain := submit("train", "t", 20), submit("plain", "p", 20)
	check(waitFinal(t, c, 60*time.Second, train...), map[string]bool{"gpu": true}, "train")
	check(waitFinal(t, c, 60*time.Second, plain...), nil, "plain")

	// 2: no GPU worker: train waits, plain goes on
	gpu.Kill()
	gpu.Wait(t, 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sl, err := c.Slots(testCtx(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		alive := false
		for _, wk := range sl.Workers {
			alive = alive || wk.Alive && wk.Labels["gpu"] == "yes"
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed GPU worker is still alive after 10 s")
		}
	}
	train2, plain2 := submit("train", "u", 5), submit("plain", "q", 5)
	check(waitFinal(t, c, 60*time.Second, plain2...), map[string]bool{"cpu": true}, "plain after the kill")
	for _, id := range train2 {
		run, err := c.Get(testCtx(t, 5*time.Second), id)
		if err != nil {
			t.Fatal(err)
		}
		if run.FinishedAt != nil || run.StartedAt != nil {
			t.Fatalf("train %s %s with no GPU worker alive: want it waiting", id, run.State)
		}
	}

	// 3: a new GPU worker picks them up
	_, gpu2J := StartWorker(t, "gpu2", r, ns, "127.0.0.1:7814", 2, "--label", "gpu=yes")
	journals["gpu2"] = gpu2J
	check(waitFinal(t, c, 60*time.Second, train2...), map[string]bool{"gpu2": true}, "train after a new GPU worker")

	// 4: a library worker serving only group a
	var mu sync.Mutex
	handled := map[string]int{}
	w, err := worker.New(testCtx(t, 5*time.Second), worker.Config{Client: r.Client(t), Namespace: ns, Advertise: "127.0.0.1:7815",
		Slots: 4, HeartbeatTTL: 2 * time.Second, Logger: procLogger(t, "lib")})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("a", worker.HandlerFunc(func(_ context.Context, run *worker.Run) (string, error) {
		mu.Lock()
		handled[run.Group]++
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		return "ok", nil
	}))
	wctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := w.Run(wctx); err != nil {
			t.Errorf("library worker: %v", err)
		}
	}()
	defer func() {
		w.StopNow()
		cancel()
		<-exited
	}()
	deadline := time.Now().Add(10 * time.Second)
	for w.Identity() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cli(t, r, ns, "group", "set", "a", "--max-active", "20")
	cli(t, r, ns, "group", "set", "b", "--max-active", "20")
	as, bs := submit("a", "a", 20), submit("b", "b", 20)
	for id, run := range waitFinal(t, c, 60*time.Second, append(as, bs...)...) {
		if run.State != "SUCCEEDED" {
			t.Errorf("%s: %s (%s), want SUCCEEDED", id, run.State, run.Reason)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if handled["b"] != 0 {
		t.Errorf("the library worker with a handler for a only ran %d runs of b", handled["b"])
	}
	sl, err := c.Slots(testCtx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range sl.Workers {
		if wk.Identity == w.Identity() && fmt.Sprint(wk.Groups) != "[a]" {
			t.Errorf("the library worker registered groups %v, want [a]", wk.Groups)
		}
	}
	t.Logf("library worker ran %d runs of a", handled["a"])
}

// TestPlacement_leaderFailover: 50 runs that require gpu=yes and 50 that
// require nothing, placed by the namespace's placement (spread), and kill
// -9 of the leader while they run: the standby
// restores the runs in flight, and every run succeeds, once, the GPU runs
// all on the GPU worker.
func TestPlacement_leaderFailover(t *testing.T) {
	t.Parallel()
	const ns = "placefail"
	r, hosts, _, journals, c := placementEnv(t, ns, 7821, 2)
	// every launch through the slot pass, which names the slots (spread)
	cli(t, r, ns, "namespace", "set", "--placement", "spread")
	var train, all []string
	for i := range 50 {
		for _, g := range []string{"train", "plain"} {
			id := fmt.Sprintf("%s%02d", g, i)
			if _, err := c.Submit(testCtx(t, 5*time.Second), g, client.SubmitOptions{ID: id, Duration: 150 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			all = append(all, id)
			if g == "train" {
				train = append(train, id)
			}
		}
	}
	WaitFor(t, 30*time.Second, "10 executions", func() bool { return len(ReadJournals(t, journals)) >= 10 })
	l, nl := hosts.killLeader(t, r, ns)
	rs := waitFinal(t, c, 90*time.Second, all...)
	byRun := ExecutionsByRun(ReadJournals(t, journals))
	for _, id := range all {
		if rs[id].State != "SUCCEEDED" {
			t.Errorf("%s: %s (%s), want SUCCEEDED", id, rs[id].State, rs[id].Reason)
		}
		if n := len(byRun[id]); n != 1 {
			t.Errorf("%s executed %d times: %+v", id, n, byRun[id])
		}
	}
	for _, id := range train {
		for _, e := range byRun[id] {
			if e.Worker != "gpu" {
				t.Errorf("%s ran on %s, want gpu", id, e.Worker)
			}
		}
	}
	t.Logf("leader killed at %d executions, epoch %d -> %d; 100 runs succeeded once each", 10, l.Epoch, nl.Epoch)
}

// TestPlacement_prefer, on real processes: a group's --prefer region=eu
// puts its runs on the eu worker while it has a free slot (the open worker
// would get them first without it), spills the rest onto other workers
// when it is full (soft), and a run's own --prefer for the same key wins.
func TestPlacement_prefer(t *testing.T) {
	t.Parallel()
	const ns = "prefer"
	r := redistest.Start(t)
	RuntimeHost(t, "host-0", r, ns, "127.0.0.1:7831")
	journals := map[string]string{}
	_, journals["open"] = StartWorker(t, "open", r, ns, "127.0.0.1:7832", 2)
	_, journals["eu"] = StartWorker(t, "eu", r, ns, "127.0.0.1:7833", 2, "--label", "region=eu")
	_, journals["us"] = StartWorker(t, "us", r, ns, "127.0.0.1:7834", 4, "--label", "region=us")
	out := cli(t, r, ns, "group", "set", "web", "--max-active", "2", "--prefer", "region=eu:10", "-o", "json")
	if !strings.Contains(out, "region=eu:10") {
		t.Fatalf("group set prints no preference:\n%s", out)
	}
	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	submit := func(group, prefix string, n int, d time.Duration, prefer ...string) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s%02d", prefix, i)
			if _, err := c.Submit(testCtx(t, 5*time.Second), group, client.SubmitOptions{ID: id, Duration: d, Prefer: prefer}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	ranOn := func(ids []string) map[string]int {
		t.Helper()
		rs := waitFinal(t, c, 60*time.Second, ids...)
		byRun := ExecutionsByRun(ReadJournals(t, journals))
		on := map[string]int{}
		for _, id := range ids {
			if rs[id].State != "SUCCEEDED" || len(byRun[id]) != 1 {
				t.Fatalf("%s: %s, executed %d times, want SUCCEEDED once", id, rs[id].State, len(byRun[id]))
			}
			on[byRun[id][0].Worker]++
		}
		return on
	}

	// 1: two at a time, the eu worker has two slots: every run on eu
	if on := ranOn(submit("web", "w", 10, 50*time.Millisecond)); on["eu"] != 10 {
		t.Fatalf("web's runs ran on %v, want all 10 on eu", on)
	}
	// 2: six at once: two on eu, the rest elsewhere (eu is full)
	cli(t, r, ns, "group", "set", "wide", "--max-active", "6", "--prefer", "region=eu")
	if on := ranOn(submit("wide", "x", 6, 3*time.Second)); on["eu"] != 2 || on["open"]+on["us"] != 4 {
		t.Fatalf("wide's runs ran on %v, want 2 on eu and 4 elsewhere", on)
	}
	// 3: a run's own preference for the same key wins over its group's
	ids := submit("web", "u", 4, 50*time.Millisecond, "region=us:20")
	if on := ranOn(ids); on["us"] != 4 {
		t.Fatalf("runs preferring region=us ran on %v, want all 4 on us", on)
	}
	if out := cli(t, r, ns, "run", "show", ids[0]); !strings.Contains(out, "region=us:20") {
		t.Fatalf("run show names no preference:\n%s", out)
	}
}
