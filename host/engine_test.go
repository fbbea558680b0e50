package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// TestRuntimeEndToEnd runs a Host with NewEngine and an in-process Worker:
// runs of three strategies complete, /status and /metrics show the runtime.
func TestRuntimeEndToEnd(t *testing.T) {
	srv := redistest.Start(t)
	st, err := storage.New(srv.Client(t), "e2e")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	admin, err := ListenAdmin("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), Config{Store: st, Advertise: "127.0.0.1:1", LeaseTTL: 500 * time.Millisecond, Logger: log, Admin: admin,
		Engine: EngineConfig{Policies: sharedWasm(t), Coordinators: 3,
			PollInterval: 2 * time.Millisecond, SlotInterval: 2 * time.Millisecond, RestoreInterval: 50 * time.Millisecond,
			StatsInterval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	hostDone := make(chan error, 1)
	go func() { hostDone <- h.Run(ctx) }()
	w := simWorker(t, worker.Config{Client: st.Redis(), Namespace: st.Namespace(), Advertise: "127.0.0.1:2", Slots: 3,
		HeartbeatTTL: 300 * time.Millisecond, Logger: log.With("component", "worker")})
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(ctx) }()
	defer func() {
		cancel()
		for _, ch := range []chan error{hostDone, workerDone} {
			select {
			case err := <-ch:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("did not stop")
			}
		}
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	}()

	bg := context.Background()
	for g, pol := range map[string]string{"gw": "wait", "gd": "discard", "gp": "priority"} {
		if _, err := st.SetGroup(bg, g, pol, 1); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := 0; i < 4; i++ {
		for _, g := range []string{"gw", "gd", "gp"} {
			r, err := st.Submit(bg, storage.SubmitRequest{Group: g, ID: fmt.Sprintf("%s-%d", g, i), Duration: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
	}
	waitFor(t, 60*time.Second, "every run final", func() bool {
		for _, id := range ids {
			r, err := st.GetRun(bg, id)
			if err != nil || !r.State.Final() {
				return false
			}
		}
		return true
	})
	for i := 0; i < 4; i++ { // wait runs every run of its group, in order
		if r, _ := st.GetRun(bg, fmt.Sprintf("gw-%d", i)); r.State != storage.StateSucceeded {
			t.Fatalf("gw-%d %s", i, r.State)
		}
	}
	base := "http://" + admin.Addr().String()
	var s Status
	waitFor(t, 10*time.Second, "status with stats", func() bool {
		resp, err := http.Get(base + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		s = Status{}
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s.Runtime != nil && s.Runtime.Stats != nil && s.Runtime.Stats.SlotsFree == 3
	})
	if !s.Leading || s.Epoch != h.elector.Lease().Epoch() || s.Namespace != "e2e" || s.Identity != h.Identity() ||
		len(s.Runtime.Policies) < 3 || s.Runtime.Counters["decisions.applied"] == 0 || s.Runtime.LastPass == nil {
		t.Fatalf("status %+v runtime %+v", s, s.Runtime)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`wasmsched_decisions_total{namespace="e2e",outcome="applied",policy="wait"`,
		`wasmsched_policy_call_seconds_bucket`, `wasmsched_slots{namespace="e2e",state="free"} 3`,
		`wasmsched_leader{namespace="e2e"} 1`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// TestRuntime_handoffIsEventDriven: with polls of an hour, a serial group
// still hands off at once: a submit and a worker's report wake the
// coordinator (Keys.WorkEvents through the host's Bus), and the
// coordinator's launches wake the slot manager. Five runs of one group
// with max_active 1 finish one after another, which only the wake-ups can
// do within the test's bound.
func TestRuntime_handoffIsEventDriven(t *testing.T) {
	srv := redistest.Start(t)
	st, err := storage.New(srv.Client(t), "handoff")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := New(context.Background(), Config{Store: st, Advertise: "127.0.0.1:1", LeaseTTL: 500 * time.Millisecond, Logger: log,
		Engine: EngineConfig{Policies: sharedWasm(t),
			PollInterval: time.Hour, SlotInterval: time.Hour, RestoreInterval: time.Hour, StatsInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.Run(ctx) }()
	w := simWorker(t, worker.Config{Client: st.Redis(), Namespace: st.Namespace(), Advertise: "127.0.0.1:2", Slots: 2,
		HeartbeatTTL: 300 * time.Millisecond, Logger: log.With("component", "worker")})
	go func() { _ = w.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !h.Leading() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// the coordinator's first pass runs at once; everything after it must be woken
	time.Sleep(100 * time.Millisecond)
	bg := context.Background()
	var ids []string
	for i := range 5 {
		r, err := st.Submit(bg, storage.SubmitRequest{Group: "serial", ID: fmt.Sprintf("h%d", i), Duration: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		for {
			r, err := st.GetRun(bg, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == storage.StateSucceeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s after 10 s with hour-long polls: the handoff waited for a poll\n%s", id, r.State, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

var (
	wasmOnce sync.Once
	wasmRT   *policies.Runtime
	wasmErr  error
)

// sharedWasm is one wasm runtime for the test binary, with a compilation
// cache reused across runs (compiling a Go plugin under -race takes seconds).
func sharedWasm(t *testing.T) *policies.Runtime {
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

// simWorker is a simulating worker of c (the test fails if it cannot be made).
func simWorker(t testing.TB, c worker.Config) *worker.Worker {
	t.Helper()
	w, err := worker.New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	w.HandleDefault(worker.Simulate())
	return w
}
