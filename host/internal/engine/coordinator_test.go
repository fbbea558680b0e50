package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

var (
	wasmOnce sync.Once
	wasmRT   *policies.Runtime
	wasmErr  error
)

// sharedWasm is one wasm runtime for the test binary. Its compilation
// cache is a fixed directory under the temp dir, reused across runs (wazero
// keys it by its version and the module hash): closing a policy drops the
// in-memory compiled module, and compiling a Go plugin under -race takes
// seconds.
func sharedWasm(t testing.TB) *policies.Runtime {
	t.Helper()
	wasmOnce.Do(func() {
		wasmRT, wasmErr = policies.NewRuntime(context.Background(), policies.Config{
			CacheDir:    filepath.Join(os.TempDir(), "wasmsched-host-test-wazero"),
			CallTimeout: 300 * time.Millisecond, PoolSize: 2,
			Logger: slog.New(slog.DiscardHandler),
		})
	})
	if wasmErr != nil {
		t.Fatal(wasmErr)
	}
	return wasmRT
}

// renv is a redis-server, a store, a hand-made leader term and an Engine
// whose tasks the test drives directly (Pass) or runs (Run).
type renv struct {
	t     testing.TB
	rdb   redis.UniversalClient // the test's own client, for fault injection
	st    *storage.Store
	reg   *prometheus.Registry
	rt    *Engine
	lease *leader.Lease
	logs  *syncBuffer
}

func newREnv(t testing.TB, cfg Config) *renv {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	st, err := storage.New(rdb, "rtest")
	if err != nil {
		t.Fatal(err)
	}
	e := &renv{t: t, rdb: rdb, st: st, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	e.newTerm()
	cfg.Policies = sharedWasm(t)
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 2 * time.Millisecond
	}
	if cfg.SlotInterval == 0 {
		cfg.SlotInterval = 2 * time.Millisecond
	}
	if cfg.RestoreInterval == 0 {
		cfg.RestoreInterval = 20 * time.Millisecond
	}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.rt, err = newEngine(context.Background(), st, e.reg, log, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the default allocation policy compiled before any run is launched: a
	// first pass that compiles it (a second under -race) would otherwise
	// count toward a short slot guard
	if _, err := e.rt.set.Preload(context.Background(), limits.DefaultAllocation); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runtime logs:\n%s", e.logs.String())
		}
		_ = e.rt.Close(context.Background())
	})
	return e
}

// newTerm makes this test the leader of a new term (a new stamp, a higher
// epoch), as a failover would.
func (e *renv) newTerm() {
	e.t.Helper()
	ctx := context.Background()
	stamp := storage.NewIdentity("leader:1")
	if err := e.rdb.Set(ctx, keyspace.Of(e.st).Lock(), stamp, time.Hour).Err(); err != nil {
		e.t.Fatal(err)
	}
	epoch, err := e.st.BecomeLeader(ctx, stamp)
	if err != nil {
		e.t.Fatal(err)
	}
	e.lease = leader.NewLease(storage.Fence{Epoch: epoch, Holder: stamp}, time.Now().Add(time.Hour), nil)
}

// runTask runs a leader task until the test ends; stop returns its error.
func (e *renv) runTask(fn leader.LeaderTask) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx, e.lease) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = errors.New("task did not stop")
			}
		})
		return err
	}
	e.t.Cleanup(func() { _ = stop() })
	return stop
}

func (e *renv) group(name, policy string, maxActive int) {
	e.t.Helper()
	if _, err := e.st.SetGroup(context.Background(), name, policy, maxActive); err != nil {
		e.t.Fatal(err)
	}
}

func (e *renv) submit(group, id string, slots int) {
	e.t.Helper()
	if _, err := e.st.Submit(context.Background(), storage.SubmitRequest{Group: group, ID: id, Slots: slots}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *renv) worker(id string, slots int, ttl time.Duration) {
	e.t.Helper()
	if err := e.st.RegisterWorker(context.Background(), id, slots, ttl); err != nil {
		e.t.Fatal(err)
	}
}

func (e *renv) run(id string) storage.Run {
	e.t.Helper()
	r, err := e.st.GetRun(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *renv) states(ids ...string) []storage.State {
	out := make([]storage.State, len(ids))
	for i, id := range ids {
		out[i] = e.run(id).State
	}
	return out
}

func (e *renv) wantStates(ids []string, want ...storage.State) {
	e.t.Helper()
	got := e.states(ids...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("states of %v: %v, want %v", ids, got, want)
	}
}

// finish reports a RUNNING run SUCCEEDED as its task-0 worker would.
func (e *renv) finish(id string) {
	e.t.Helper()
	r := e.run(id)
	if len(r.Assignments) == 0 {
		e.t.Fatalf("finish %s: no assignments (%s)", id, r.State)
	}
	a := r.Assignments[0]
	if err := e.st.Report(context.Background(), a.Worker, id, a.Token, storage.StateSucceeded, "done"); err != nil {
		e.t.Fatal(err)
	}
}

// pass runs one coordinator pass and waits for the groups it decided
// alone (Coordinator.decideAlone), so tests see every outcome.
func (e *renv) pass() bool {
	e.t.Helper()
	did, err := e.rt.coord.Pass(context.Background(), e.lease)
	e.rt.coord.aloneWG.Wait()
	if err != nil {
		e.t.Fatal(err)
	}
	return did
}

func (e *renv) slotPass() int {
	e.t.Helper()
	n, err := e.rt.slots.Pass(context.Background(), e.lease)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// settle runs coordinator and slot passes until neither does anything.
func (e *renv) settle() {
	e.t.Helper()
	for i := 0; i < 50; i++ {
		did := e.pass()
		n := e.slotPass()
		if !did && n == 0 {
			return
		}
	}
	e.t.Fatal("coordinator did not settle in 50 passes")
}

func (e *renv) outcomes(policy string) map[string]float64 {
	e.t.Helper()
	out := map[string]float64{}
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wasmsched_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var p, o string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "policy":
					p = l.GetValue()
				case "outcome":
					o = l.GetValue()
				}
			}
			if p == policy {
				out[o] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// metric sums the samples of a counter or gauge whose labels include the
// given name/value pairs.
func (e *renv) metric(name string, labels ...string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func (e *renv) dirty() []string {
	e.t.Helper()
	ds, err := storagetest.DirtyGroups(context.Background(), e.st, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

func builtinVersion(t *testing.T, name string) string {
	b, ok := plugins.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	return digest.Short(digest.SHA256(b))
}

func TestCoordinatorWaitLaunchesInSeqOrderWithinMaxActive(t *testing.T) {
	e := newREnv(t, Config{})
	e.group("gw", "wait", 2)
	e.worker("w1", 10, time.Hour)
	ids := []string{"w-1", "w-2", "w-3", "w-4", "w-5"}
	for _, id := range ids {
		e.submit("gw", id, 1)
	}
	W, R, S := storage.StateWaiting, storage.StateRunning, storage.StateSucceeded
	e.settle()
	e.wantStates(ids, R, R, W, W, W)
	if ds := e.dirty(); len(ds) != 0 {
		t.Fatalf("dirty after settle: %v", ds)
	}
	r := e.run("w-1")
	if r.Policy != "wait" || r.PolicyVersion != builtinVersion(t, "wait") {
		t.Fatalf("run policy %q version %q, want wait %s", r.Policy, r.PolicyVersion, builtinVersion(t, "wait"))
	}
	e.finish("w-2") // finishing out of order frees one place: the oldest waiting goes
	e.settle()
	e.wantStates(ids, R, S, R, W, W)
	e.finish("w-1")
	e.settle()
	e.wantStates(ids, S, S, R, R, W)
	e.finish("w-3")
	e.finish("w-4")
	e.settle()
	e.wantStates(ids, S, S, S, S, R)
	oc := e.outcomes("wait")
	// A decision is complete for its snapshot (no re-dirty): every finish
	// leads to one launch decision; no empty settle decision is needed.
	if oc[OutcomeApplied] < 4 || oc[OutcomeInvalid]+oc[OutcomeTrap]+oc[OutcomeError] != 0 {
		t.Fatalf("outcomes %v", oc)
	}
}

func TestCoordinatorDiscard(t *testing.T) {
	e := newREnv(t, Config{})
	e.group("gd", "discard", 1)
	e.worker("w1", 4, time.Hour)
	ids := []string{"d-1", "d-2", "d-3"}
	for _, id := range ids {
		e.submit("gd", id, 1)
	}
	e.settle()
	e.wantStates(ids, storage.StateRunning, storage.StateDiscarded, storage.StateDiscarded)
	e.submit("gd", "d-4", 1) // one is active: discarded at once
	e.settle()
	e.wantStates([]string{"d-4"}, storage.StateDiscarded)
}

func TestCoordinatorPriority(t *testing.T) {
	e := newREnv(t, Config{})
	e.group("gp", "priority", 1)
	e.worker("w1", 4, time.Hour)
	e.submit("gp", "p-1", 1)
	e.settle()
	e.wantStates([]string{"p-1"}, storage.StateRunning)
	e.submit("gp", "p-2", 1)
	e.submit("gp", "p-3", 1)
	if !e.pass() {
		t.Fatal("pass did nothing")
	}
	// the newest launches (on a free slot at once), the older waiting is
	// discarded, the active one stops
	e.wantStates([]string{"p-1", "p-2", "p-3"}, storage.StateStopping, storage.StateDiscarded, storage.StateRunning)
	e.settle()
	e.wantStates([]string{"p-3"}, storage.StateRunning)
}

func TestCoordinatorStaleSnapshotSkippedThenDecided(t *testing.T) {
	e := newREnv(t, Config{})
	e.group("gs", "wait", 1)
	e.worker("w1", 2, time.Hour)
	e.submit("gs", "s-1", 1)
	var bumped sync.Once
	e.rt.coord.beforeApply = func(g string) {
		bumped.Do(func() { e.group(g, "wait", 1) }) // same settings, new version
	}
	e.pass()
	e.wantStates([]string{"s-1"}, storage.StateWaiting)
	if oc := e.outcomes("wait"); oc[OutcomeStale] != 1 || oc[OutcomeApplied] != 0 {
		t.Fatalf("outcomes after the stale pass %v", oc)
	}
	if got := e.metric("wasmsched_stale_total", "op", "apply"); got != 1 {
		t.Fatalf("stale counter %v", got)
	}
	e.pass()
	e.wantStates([]string{"s-1"}, storage.StateRunning)
}

// TestCoordinatorPlacesLaunches: an apply places its launches on free
// slots itself (RUNNING, no slot-manager pass, the slot manager not
// woken); a launch that does not fit waits LAUNCHED and wakes the slot
// manager, which places it once a slot is free.
func TestCoordinatorPlacesLaunches(t *testing.T) {
	e := newREnv(t, Config{})
	e.worker("w1", 1, time.Hour)
	e.group("ga", "wait", 1)
	e.group("gb", "wait", 1)
	e.submit("ga", "a", 1)
	if !e.pass() {
		t.Fatal("pass did nothing")
	}
	e.wantStates([]string{"a"}, storage.StateRunning)
	select {
	case <-e.rt.slots.wake:
		t.Fatal("the slot manager was woken for a launch the apply placed")
	default:
	}
	e.submit("gb", "b", 1)
	e.pass()
	e.wantStates([]string{"b"}, storage.StateLaunched)
	select {
	case <-e.rt.slots.wake:
	default:
		t.Fatal("a queued launch did not wake the slot manager")
	}
	e.finish("a")
	if n := e.slotPass(); n != 1 {
		t.Fatalf("slot pass placed %d, want b", n)
	}
	e.wantStates([]string{"a", "b"}, storage.StateSucceeded, storage.StateRunning)
	e.checkSlots("a", "b")
}

func TestCoordinatorBrokenPoliciesChangeNothing(t *testing.T) {
	faulty, err := os.ReadFile("../../../policies/testdata/faulty/faulty.wasm")
	if err != nil {
		t.Fatal(err)
	}
	e := newREnv(t, Config{Backoff: time.Hour})
	ctx := context.Background()
	if _, err := e.st.PushPolicy(ctx, storage.PushRequest{Name: "faulty", Kind: "serial", Who: "test", Blob: faulty, Activate: true}); err != nil {
		t.Fatal(err)
	}
	// faulty's behaviour is chosen by max_active: 98 panics, 96 returns an
	// invalid decision, 99 loops until the deadline.
	e.group("trap", "faulty", 98)
	e.group("invalid", "faulty", 96)
	e.group("loop", "faulty", 99)
	e.group("unknown", "no-such-policy", 1)
	ids := []string{"t-1", "i-1", "l-1", "u-1"}
	for i, g := range []string{"trap", "invalid", "loop", "unknown"} {
		e.submit(g, ids[i], 1)
	}
	if e.pass() {
		t.Fatal("a pass with only broken policies reported work")
	}
	e.wantStates(ids, storage.StateWaiting, storage.StateWaiting, storage.StateWaiting, storage.StateWaiting)
	want := map[string]float64{OutcomeTrap: 1, OutcomeInvalid: 1, OutcomeTimeout: 1}
	if oc := e.outcomes("faulty"); fmt.Sprint(oc) != fmt.Sprint(want) {
		t.Fatalf("faulty outcomes %v, want %v", oc, want)
	}
	if oc := e.outcomes("no-such-policy"); oc[OutcomeError] != 1 {
		t.Fatalf("unknown policy outcomes %v", oc)
	}
	if ds := e.dirty(); len(ds) != 4 {
		t.Fatalf("dirty %v: broken groups must stay dirty", ds)
	}
	// backoff: the next pass does not call the broken policies again
	e.pass()
	if oc := e.outcomes("faulty"); fmt.Sprint(oc) != fmt.Sprint(want) {
		t.Fatalf("after backoff pass: faulty outcomes %v, want %v", oc, want)
	}
	// a new registry generation (rollback-like fix) clears the backoff:
	// point "faulty" at the wait plugin
	wait, _ := plugins.Builtin("wait")
	if _, err := e.st.PushPolicy(ctx, storage.PushRequest{Name: "faulty", Kind: "serial", Who: "test", Blob: wait, Activate: true}); err != nil {
		t.Fatal(err)
	}
	e.pass()
	e.wantStates(ids[:3], storage.StateLaunched, storage.StateLaunched, storage.StateLaunched)
	if r := e.run("t-1"); r.PolicyVersion != builtinVersion(t, "wait") || r.Policy != "faulty" {
		t.Fatalf("t-1 launched by %s %s", r.Policy, r.PolicyVersion)
	}
	// the old faulty version was retired and closed (nothing held it)
	for _, lp := range e.rt.set.Loaded() {
		if lp.Name == "faulty" && lp.SHA256 == digest.SHA256(faulty) {
			t.Fatalf("retired version still loaded: %+v", lp)
		}
	}
}

func TestCoordinatorFencedTaskReturnsErrFenced(t *testing.T) {
	e := newREnv(t, Config{})
	e.group("gf", "wait", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func(l *leader.Lease) { done <- e.rt.coord.Run(ctx, l) }(e.lease)
	e.submit("gf", "f-1", 1)
	waitFor(t, 60*time.Second, "f-1 launched", func() bool { return e.run("f-1").State == storage.StateLaunched })
	// another leader takes over; the task's lease still looks valid locally
	e.newTerm()
	e.submit("gf", "f-2", 1) // dirty again: the settle apply is fenced
	select {
	case err := <-done:
		if !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("coordinator returned %v, want ErrFenced", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("coordinator did not return after being fenced")
	}
	if oc := e.outcomes("wait"); oc[OutcomeFenced] != 1 {
		t.Fatalf("outcomes %v", oc)
	}
	if got := e.metric("wasmsched_fenced_total", "task", "coordinator"); got != 1 {
		t.Fatalf("fenced counter %v", got)
	}
	if s := e.run("f-2").State; s != storage.StateWaiting {
		t.Fatalf("f-2 %s after fencing", s)
	}
}

func TestCoordinatorManyGroupsConcurrently(t *testing.T) {
	e := newREnv(t, Config{Coordinators: 4})
	e.worker("w1", 200, time.Hour)
	var ids []string
	for g := 0; g < 40; g++ {
		gn := fmt.Sprintf("g%02d", g)
		e.group(gn, []string{"wait", "discard", "priority"}[g%3], 1)
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("%s-%d", gn, i)
			e.submit(gn, id, 1)
			ids = append(ids, id)
		}
	}
	stopC := e.runTask(e.rt.coord.Run)
	stopS := e.runTask(e.rt.slots.Run)
	waitFor(t, 60*time.Second, "one running run per group", func() bool {
		running := 0
		for _, id := range ids {
			if e.run(id).State == storage.StateRunning {
				running++
			}
		}
		return running == 40 && len(e.dirty()) == 0
	})
	if err := stopC(); err != nil {
		t.Fatal(err)
	}
	if err := stopS(); err != nil {
		t.Fatal(err)
	}
	sv, err := e.st.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sv.Assigned != 40 {
		t.Fatalf("assigned %d, want 40", sv.Assigned)
	}
	st := e.rt.Status()
	names := []string{}
	for _, p := range st.Policies {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[discard fifo priority wait]" || st.Counters["decisions.applied"] < 40 || st.LastPass == nil {
		t.Fatalf("status %+v", st)
	}
}

// TestCoordinator_Pass_oneBatchWhileRunsWaitForSlots: with Coordinators
// 4 a pass decides its batches 4 at a time, but while a launched run waits
// for slots (the slot manager's last pass left one) one at a time: a
// faster decision would only queue its launches behind it.
func TestCoordinator_Pass_oneBatchWhileRunsWaitForSlots(t *testing.T) {
	for _, c := range []struct {
		name    string
		waiting bool
		want    func(int32) bool
	}{
		{"slots-free", false, func(n int32) bool { return n > 1 }},
		{"run-waits", true, func(n int32) bool { return n == 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newREnv(t, Config{Coordinators: 4})
			e.worker("w1", 400, time.Hour)
			for g := range 256 { // 4 batches of 64
				gn := fmt.Sprintf("g%03d", g)
				e.group(gn, "wait", 1)
				e.submit(gn, gn+"-1", 1)
			}
			// a batch calls the hook for its groups one after another: more
			// than one call at a time is more than one batch at a time
			var inflight, most atomic.Int32
			var mu sync.Mutex
			seen := map[string]bool{}
			e.rt.coord.beforeApply = func(group string) {
				mu.Lock()
				seen[group] = true
				mu.Unlock()
				n := inflight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inflight.Add(-1)
			}
			e.rt.slots.waiting.Store(c.waiting)
			if _, err := e.rt.coord.Pass(context.Background(), e.lease); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 256 || !c.want(most.Load()) {
				t.Fatalf("%d groups decided, at most %d batches at once", len(seen), most.Load())
			}
		})
	}
}

// TestCoordinator_Pass_slowGroupDecidedAlone: a group whose policy failed
// (here: it sleeps until the 300 ms deadline) is decided on its own, in
// the background, so the other groups of what would be its batch are
// decided and applied without waiting for it.
func TestCoordinator_Pass_slowGroupDecidedAlone(t *testing.T) {
	e := newREnv(t, Config{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond})
	sleepy, err := os.ReadFile("../../../policies/testdata/sleep.wasm")
	if err != nil {
		t.Fatal(err)
	}
	e.push("sleepy", sleepy)
	e.group("bad", "sleepy", 1)
	var good []string
	for i := range 15 {
		g := fmt.Sprintf("good-%02d", i)
		e.group(g, "wait", 1)
		good = append(good, g)
	}
	e.worker("w1", 64, time.Hour)
	e.submit("bad", "bad-1", 1)
	e.pass() // one batch: the bad group's timeout holds it up this once, then it backs off
	if n := e.outcomes("sleepy")[OutcomeTimeout]; n != 1 {
		t.Fatalf("sleepy timeouts %v, want 1", n)
	}
	var ids []string
	for _, g := range good {
		id := g + "-run"
		e.submit(g, id, 1)
		ids = append(ids, id)
	}
	c := e.rt.coord
	start := time.Now()
	if _, err := c.Pass(context.Background(), e.lease); err != nil { // not e.pass: it waits for lone decisions
		t.Fatal(err)
	}
	took := time.Since(start)
	c.mu.Lock()
	inFlight := c.alone["bad"]
	c.mu.Unlock()
	if !inFlight {
		t.Fatalf("after the pass (%v) the bad group is not being decided alone", took)
	}
	for _, id := range ids {
		if st := e.run(id).State; st == storage.StateWaiting {
			t.Fatalf("%s still WAITING after a pass of %v: held up by the slow group", id, took)
		}
	}
	c.aloneWG.Wait()
	if n := e.outcomes("sleepy")[OutcomeTimeout]; n != 2 {
		t.Fatalf("sleepy timeouts %v, want 2", n)
	}
	if st := e.run("bad-1").State; st != storage.StateWaiting {
		t.Fatalf("bad-1 is %s, want WAITING", st)
	}
	t.Logf("pass with the slow group alone took %v", took)
}

// TestCoordinator_Pass_versionOverLimitNeverLoaded: a version that exceeds
// a static limit (written to the registry without the push gate) is never
// loaded by a host: its group waits, the failure names the limit.
func TestCoordinator_Pass_versionOverLimitNeverLoaded(t *testing.T) {
	bomb, err := os.ReadFile("../../../policies/testdata/hostile/table-huge.wasm")
	if err != nil {
		t.Fatal(err)
	}
	e := newREnv(t, Config{Backoff: time.Hour})
	e.push("bomb", bomb)
	e.group("g", "bomb", 1)
	e.submit("g", "g-1", 1)
	e.pass()
	e.wantStates([]string{"g-1"}, storage.StateWaiting)
	if oc := e.outcomes("bomb"); oc[OutcomeError] != 1 {
		t.Fatalf("outcomes %v, want one error", oc)
	}
	for _, lp := range e.rt.set.Loaded() {
		if lp.Name == "bomb" {
			t.Fatalf("loaded: %+v", lp)
		}
	}
	if logs := e.logs.String(); !strings.Contains(logs, "MaxTableSize") || !strings.Contains(logs, "policy unavailable") {
		t.Fatalf("the log does not name the limit:\n%s", logs)
	}
}
