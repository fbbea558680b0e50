package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

func TestConfigValidate(t *testing.T) {
	st, err := storage.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), "ns")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"zero with store", Config{Store: st}, ""},
		{"no store", Config{}, "Store is required"},
		{"ttl too short", Config{Store: st, LeaseTTL: 50 * time.Millisecond}, "lease TTL"},
		{"min ttl", Config{Store: st, LeaseTTL: MinLeaseTTL}, ""},
		{"negative refresh", Config{Store: st, RefreshInterval: -1}, "refresh interval"},
		{"negative retry", Config{Store: st, RetryInterval: -1}, "retry interval"},
		{"margin too big", Config{Store: st, LeaseTTL: time.Second, SafetyMargin: 500 * time.Millisecond}, "safety margin"},
		{"refresh too slow", Config{Store: st, LeaseTTL: time.Second, RefreshInterval: 950 * time.Millisecond}, "refresh interval"},
		{"bad identity", Config{Store: st, Identity: "nohash"}, "identity"},
		{"good identity", Config{Store: st, Identity: storage.NewIdentity("a:1")}, ""},
		{"engine", Config{Store: st, Engine: EngineConfig{Coordinators: -1}}, "coordinators"},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	c := Config{Store: st, LeaseTTL: 900 * time.Millisecond}.withDefaults()
	if c.RefreshInterval != 300*time.Millisecond || c.RetryInterval != 225*time.Millisecond ||
		c.SafetyMargin != 90*time.Millisecond || c.TickInterval != 4500*time.Millisecond ||
		c.Identity == "" || c.Logger == nil || c.Registry == nil {
		t.Fatalf("defaults %+v", c)
	}
	if d := (Config{Store: st}).withDefaults(); d.LeaseTTL != DefaultLeaseTTL {
		t.Fatalf("default TTL %v", d.LeaseTTL)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type testHost struct {
	*Host
	st   *storage.Store
	logs *syncBuffer
	stop context.CancelFunc
	done chan error
}

func startHost(t *testing.T, srv *redistest.Server, cfg Config, tasks ...leader.Task) *testHost {
	t.Helper()
	c := srv.Client(t)
	st, err := storage.New(c, "ns")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cfg.Store = st
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		h.elector.AddLeaderTask(tk.Name, tk.Run)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	ctx, cancel := context.WithCancel(context.Background())
	th := &testHost{Host: h, st: st, logs: logs, stop: cancel, done: make(chan error, 1)}
	go func() { th.done <- h.Run(ctx) }()
	t.Cleanup(func() { th.shutdown(t) })
	return th
}

func (th *testHost) shutdown(t *testing.T) {
	t.Helper()
	th.stop()
	select {
	case err := <-th.done:
		if err != nil {
			t.Errorf("host run: %v", err)
		}
		th.done <- nil // idempotent
	case <-time.After(5 * time.Second):
		t.Fatal("host did not stop within 5s")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHostLeadsTicksAndReleasesOnShutdown(t *testing.T) {
	srv := redistest.Start(t)
	h := startHost(t, srv, Config{Advertise: "127.0.0.1:1", LeaseTTL: 300 * time.Millisecond})
	ctx := context.Background()
	waitFor(t, 3*time.Second, "leadership", h.Leading)
	li, err := h.st.Leader(ctx)
	l := h.elector.Lease()
	if err != nil || l == nil || li.Identity != h.Identity() || li.Epoch != l.Epoch() || li.Epoch < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("leader %+v, %v; want %s at the lease's epoch (>= Redis TIME in ms)", li, err, h.Identity())
	}
	waitFor(t, 3*time.Second, "two ticks", func() bool {
		tk, _ := h.st.LastTick(ctx)
		return tk.Count >= 2 && tk.Holder == h.Identity() && tk.Epoch == l.Epoch()
	})
	h.shutdown(t)
	if holder, _ := h.st.LockHolder(ctx); holder != "" {
		t.Fatal("lock still held after shutdown")
	}
	if h.activeLoops() != 0 || h.maxActiveLoops() != 1 {
		t.Fatalf("active %d max %d", h.activeLoops(), h.maxActiveLoops())
	}
	for _, s := range []string{"became leader", "renouncing leadership", "leader lock released"} {
		if !strings.Contains(h.logs.String(), s) {
			t.Errorf("log lacks %q", s)
		}
	}
}

// TestRepeatedDemotePromote forces lease loss 20 times (deleting the lock or
// stealing it) and checks that one host never runs two task sets at once and
// that every term has a higher epoch.
func TestRepeatedDemotePromote(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()

	var running, maxRunning atomic.Int32
	var mu sync.Mutex
	var epochs []int64
	started := make(chan int64, 64)
	task := func(ctx context.Context, l *leader.Lease) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		epochs = append(epochs, l.Epoch())
		mu.Unlock()
		started <- l.Epoch()
		<-ctx.Done()
		// Linger a little during drain so an overlapping next term would show.
		time.Sleep(20 * time.Millisecond)
		return nil
	}
	h := startHost(t, srv, Config{
		Advertise: "127.0.0.1:2",
		LeaseTTL:  300 * time.Millisecond,
	}, leader.Task{Name: "probe", Run: task}, leader.Task{Name: "probe2", Run: func(ctx context.Context, l *leader.Lease) error { <-ctx.Done(); return nil }})
	lockKey := keyspace.Of(h.st).Lock()
	// Sample the loop's own counter concurrently.
	var sampledMax atomic.Int32
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		for sampleCtx.Err() == nil {
			if n := int32(h.activeLoops()); n > sampledMax.Load() {
				sampledMax.Store(n)
			}
			time.Sleep(time.Millisecond)
		}
	}()

	const losses = 20
	var last int64
	for i := 0; i <= losses; i++ {
		select {
		case e := <-started:
			if e <= last {
				t.Fatalf("term %d: epoch %d not above previous %d", i, e, last)
			}
			last = e
		case <-time.After(5 * time.Second):
			t.Fatalf("term %d did not start", i)
		}
		if i == losses {
			break
		}
		if i%2 == 0 {
			if err := rdb.Del(ctx, lockKey).Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := rdb.Set(ctx, lockKey, "thief#1#00", 150*time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	stopSampling()
	if m := maxRunning.Load(); m != 1 {
		t.Fatalf("max concurrent task loops (task view) = %d, want 1", m)
	}
	if m := h.maxActiveLoops(); m != 1 {
		t.Fatalf("MaxActiveLoops = %d, want 1", m)
	}
	if m := sampledMax.Load(); m != 1 {
		t.Fatalf("sampled ActiveLoops max = %d, want 1", m)
	}
	if got := h.elector.TermCount(); got < losses+1 {
		t.Fatalf("terms %d, want >= %d", got, losses+1)
	}
	if n := strings.Count(h.logs.String(), "lost leadership"); n < losses {
		t.Fatalf("%d 'lost leadership' logs, want >= %d", n, losses)
	}
}

// TestFencedTaskDemotes bumps the fence under the leader's feet: its next
// fenced write or check (the tick, the reaper's) is rejected, it demotes at
// once and later leads again with a higher epoch.
func TestFencedTaskDemotes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	// A 20 ms tick is the first task to write (the engine's are idle): its
	// fenced write must be counted like every task's.
	h := startHost(t, srv, Config{Advertise: "127.0.0.1:3", LeaseTTL: 300 * time.Millisecond, TickInterval: 20 * time.Millisecond})
	waitFor(t, 3*time.Second, "leadership", h.Leading)
	l := h.elector.Lease()
	if l == nil {
		t.Fatal("no lease while leading")
	}
	// Someone (a buggy successor) bumped the epoch: our fence is stale.
	if err := rdb.HIncrBy(ctx, keyspace.Of(h.st).Fence(), "epoch", 1).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease not revoked after a fenced write")
	}
	if !strings.HasPrefix(l.Reason(), "fenced: task ") { // the first leader task to write or check the fence
		t.Fatalf("reason %q", l.Reason())
	}
	// Whichever task it was (the tick too), the fenced write is counted.
	task, _, _ := strings.Cut(strings.TrimPrefix(l.Reason(), "fenced: task "), ":")
	if v := fencedCount(t, h.cfg.Registry, task); v < 1 {
		t.Fatalf("wasmsched_fenced_total{task=%q} = %v after %q, want >= 1", task, v, l.Reason())
	}
	// "lost leadership" is logged before the drain ends, not after.
	waitFor(t, 3*time.Second, "the drain", func() bool { return strings.Contains(h.logs.String(), "leader tasks drained") })
	logs := h.logs.String()
	if lost, drained := strings.Index(logs, "lost leadership"), strings.Index(logs, "leader tasks drained"); lost < 0 || lost > drained {
		t.Fatalf("want 'lost leadership' logged before 'leader tasks drained' (at %d, %d)", lost, drained)
	}
	if err := h.st.Tick(ctx, l.Fence()); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("tick with the old fence: %v, want ErrFenced", err)
	}
	waitFor(t, 3*time.Second, "re-election", func() bool {
		nl := h.elector.Lease()
		return nl != nil && nl.Valid() && nl.Epoch() > l.Epoch()+1
	})
}

// TestTwoHostsOneLeader: two hosts, exactly one leads; cancelling the
// leader hands over at once (lock released).
func TestTwoHostsOneLeader(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := startHost(t, srv, Config{Advertise: "127.0.0.1:4", LeaseTTL: 2 * time.Second})
	b := startHost(t, srv, Config{Advertise: "127.0.0.1:5", LeaseTTL: 2 * time.Second})
	waitFor(t, 5*time.Second, "a leader", func() bool { return a.Leading() || b.Leading() })
	time.Sleep(300 * time.Millisecond)
	if a.Leading() == b.Leading() {
		t.Fatalf("a leading %v, b leading %v", a.Leading(), b.Leading())
	}
	leader, standby := a, b
	if b.Leading() {
		leader, standby = b, a
	}
	li, _ := leader.st.Leader(ctx)
	leader.shutdown(t)
	start := time.Now()
	waitFor(t, 1500*time.Millisecond, "standby takeover well before the TTL", standby.Leading)
	t.Logf("takeover after graceful shutdown: %v", time.Since(start))
	nl, _ := standby.st.Leader(ctx)
	if nl.Identity != standby.Identity() || nl.Epoch <= li.Epoch {
		t.Fatalf("new leader %+v, old %+v", nl, li)
	}
}

// fencedCount reads wasmsched_fenced_total{task} from the host's registry.
func fencedCount(t *testing.T, reg prometheus.Registerer, task string) float64 {
	t.Helper()
	g, ok := reg.(prometheus.Gatherer)
	if !ok {
		t.Fatalf("registry %T cannot be gathered", reg)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wasmsched_fenced_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "task" && lp.GetValue() == task {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
