package host

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Two Multis over 4 namespaces balance to 2/2; when one stops (graceful),
// the other leads all 4; the registry lists the namespaces.
func TestMultiBalance(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client(t)
	nss := []string{"m1", "m2", "m3", "m4"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(name string) (*Multi, context.CancelFunc, chan error) {
		m, err := NewMulti(context.Background(), MultiConfig{Client: c, Namespaces: nss,
			Host: Config{Advertise: name, LeaseTTL: 400 * time.Millisecond, Logger: log}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			if err := m.Run(ctx); err != nil {
				t.Errorf("%s: run: %v", name, err)
			}
			close(done)
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				buf := make([]byte, 1<<20)
				t.Errorf("%s: Run did not return 30s after cancel; goroutines:\n%s", name, buf[:runtime.Stack(buf, true)])
			}
		})
		return m, cancel, done
	}
	a, cancelA, doneA := start("a:1")
	b, _, _ := start("b:1")
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s (a %v, b %v)", what, a.Leading(), b.Leading())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// /status reports what the last balancing pass saw, which can lag the
	// leases by one pass: wait for both to agree.
	wait("2/2 with /status showing 2 hosts and target 2", func() bool {
		if len(a.Leading()) != 2 || len(b.Leading()) != 2 {
			return false
		}
		rec := httptest.NewRecorder()
		a.adminHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
		var st MultiStatus
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("/status: %v %s", err, rec.Body.String())
		}
		return st.Namespaces == 4 && st.HostsAlive == 2 && st.Target == 2
	})
	// One pub/sub connection per process (its Bus), not one per namespace
	// and channel: 2 Multis x 4 namespaces hold 2.
	if n := redistest.PubSubConns(t, c); n != 2 {
		t.Errorf("%d pub/sub connections for 2 processes of 4 namespaces, want 2", n)
	}
	got, err := storage.ListNamespaces(context.Background(), c)
	if err != nil || len(got) != 4 {
		t.Fatalf("registry: %v %v", got, err)
	}
	cancelA()
	<-doneA
	wait("b leads all 4", func() bool { return len(b.Leading()) == 4 })
	// No namespace ever had two task sets in one process.
	for _, h := range append(a.hosts, b.hosts...) {
		if h.maxActiveLoops() > 1 {
			t.Errorf("%s: %d task sets at once", h.ns, h.maxActiveLoops())
		}
	}
}

// A host below its target is eager for target-minus-leading campaigns at a
// time; the campaigns in flight count as won, so the next is reluctant
// until one ends. Balancing off: never reluctant.
func TestMulti_beginCampaign(t *testing.T) {
	r := redistest.Start(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name     string
		disabled bool
		target   int
		want     []bool // beginCampaign results in order, before any end
	}{
		{"target 2", false, 2, []bool{false, false, true, true}},
		{"target 1", false, 1, []bool{false, true}},
		{"no target yet", false, 0, []bool{false, false, false}},
		{"balance disabled", true, 1, []bool{false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMulti(context.Background(), MultiConfig{Client: r.Client(t), Namespaces: []string{"c1", "c2", "c3", "c4"},
				Host: Config{Advertise: "c:1", Logger: log}, Balance: BalanceConfig{Disabled: tc.disabled}})
			if err != nil {
				t.Fatal(err)
			}
			m.target = tc.target
			for i, want := range tc.want {
				if got := m.beginCampaign(); got != want {
					t.Fatalf("campaign %d: reluctant=%v, want %v", i+1, got, want)
				}
			}
			if tc.target > 0 && !tc.disabled {
				// Down to target campaigns in flight: still reluctant;
				// one fewer: eager again.
				for range len(tc.want) - tc.target {
					m.endCampaign()
				}
				if !m.beginCampaign() {
					t.Fatalf("%d in flight: eager, want reluctant", tc.target)
				}
				m.endCampaign()
				m.endCampaign()
				if m.beginCampaign() {
					t.Fatalf("%d in flight: reluctant, want eager", tc.target-1)
				}
			}
		})
	}
}

// A host over its target resigns only after that has lasted a whole
// presence TTL: a host that died (here a ghost entry in the presence set)
// must have dropped out of the count before anyone gives namespaces away.
func TestMulti_balanceOnce_waitsPresenceTTL(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client(t)
	const presence = 1500 * time.Millisecond
	m, err := NewMulti(context.Background(), MultiConfig{Client: c, Namespaces: []string{"p1", "p2", "p3", "p4"},
		Host:    Config{Advertise: "solo:1", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Balance: BalanceConfig{Interval: time.Hour, PresenceTTL: presence, Cooldown: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for len(m.Leading()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("leading %v, want all 4", m.Leading())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ghost := func(on bool) {
		t.Helper()
		var err error
		if on {
			err = c.ZAdd(ctx, storage.HostsKey, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "ghost"}).Err()
		} else {
			err = c.ZRem(ctx, storage.HostsKey, "ghost").Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// No resignation while less than a presence TTL has passed since the
	// clock started (checked against a start taken before the call that
	// starts it, so a descheduled test cannot make this fail wrongly).
	var start time.Time
	noResign := func(when string) {
		t.Helper()
		ns := m.balanceOnce(ctx)
		if ns != "" && time.Since(start) < presence {
			t.Fatalf("%s: resigned %s after %v over the target (leading %v)", when, ns, time.Since(start), m.Leading())
		}
	}
	ghost(true) // 2 hosts alive: target 2, leading 4
	start = time.Now()
	noResign("first check over the target")
	time.Sleep(presence / 3)
	noResign("over the target for a third of the presence TTL")
	ghost(false) // the ghost's presence ran out: target 4 again
	if ns := m.balanceOnce(ctx); ns != "" {
		t.Fatalf("back at the target: resigned %s", ns)
	}
	ghost(true)
	start = time.Now()
	noResign("over the target again: the clock starts anew")
	time.Sleep(presence / 2)
	noResign("half a presence TTL after the clock restarted")
	time.Sleep(presence/2 + 100*time.Millisecond)
	if ns := m.balanceOnce(ctx); ns == "" {
		target, _ := m.targetNow()
		t.Fatalf("over the target for a whole presence TTL: no resignation (leading %v, target %d)", m.Leading(), target)
	}
}

// Zero BalanceConfig fields take their documented defaults.
func TestNewMulti_balanceDefaults(t *testing.T) {
	r := redistest.Start(t)
	m, err := NewMulti(context.Background(), MultiConfig{Client: r.Client(t), Namespaces: []string{"d1"},
		Host: Config{Advertise: "d:1", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	b := m.cfg.Balance
	if b.Interval != time.Second || b.Cooldown != time.Second || b.Holdoff != 8*time.Second || b.PresenceTTL != 3*time.Second {
		t.Fatalf("defaults for LeaseTTL 2s: %+v, want interval 1s, cooldown 1s, holdoff 8s, presence 3s", b)
	}
}

// TestNewMulti_sharesPolicies: a Multi's namespaces decide with one loaded
// version per policy.
func TestNewMulti_sharesPolicies(t *testing.T) {
	c := redistest.Start(t).Client(t)
	m, err := NewMulti(context.Background(), MultiConfig{Client: c, Namespaces: []string{"m1", "m2", "m3"},
		Host: Config{Advertise: "a:1", Logger: slog.New(slog.DiscardHandler), Engine: EngineConfig{Policies: sharedWasm(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	var first *policies.Policy
	for i, h := range m.hosts {
		r, err := h.engine.Policies().Acquire(context.Background(), "priority")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		if i == 0 {
			first = r.Policy
		} else if r.Policy != first {
			t.Fatalf("namespace %d loaded its own priority", i)
		}
	}
}
