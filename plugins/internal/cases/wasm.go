package cases

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/policies"
)

var (
	rtOnce   sync.Once
	rt       *policies.Runtime
	rtErr    error
	cacheDir string
	mu       sync.Mutex
	loaded   = map[string]*policies.Policy{}
)

// Main runs a test binary's tests with one policies.Runtime (created on first
// use) whose compilation cache lives in a temp dir removed afterwards.
func Main(m *testing.M) {
	code := m.Run()
	if rt != nil {
		_ = rt.Close(context.Background())
	}
	if cacheDir != "" {
		_ = os.RemoveAll(cacheDir)
	}
	os.Exit(code)
}

// Load compiles wasm once per test binary (keyed by name) on the shared runtime.
func Load(tb testing.TB, name string, wasm []byte) *policies.Policy {
	tb.Helper()
	rtOnce.Do(func() {
		cacheDir, rtErr = os.MkdirTemp("", "wasmsched-cache-")
		if rtErr == nil {
			// decisions are compared, not timed: a loaded machine may take
			// longer than the default 50 ms on the largest snapshots
			rt, rtErr = policies.NewRuntime(context.Background(), policies.Config{CacheDir: cacheDir, CallTimeout: 2 * time.Second})
		}
	})
	if rtErr != nil {
		tb.Fatal(rtErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if p, ok := loaded[name]; ok {
		return p
	}
	p, err := rt.Load(context.Background(), name, wasm)
	if err != nil {
		tb.Fatal(err)
	}
	loaded[name] = p
	return p
}

// BenchSnapshot is the snapshot of the Decide benchmarks: max_active 2, one
// RUNNING run and n WAITING runs.
func BenchSnapshot(policy string, n int) *abi.SerialSnapshot {
	w := make([]abi.Run, n)
	for i := range w {
		w[i] = t.Waiting(fmt.Sprintf("run-%06d", i+2), uint64(i+2))
	}
	return t.Snapshot(policy, 2, []abi.Run{t.Running("run-000001", 1)}, w)
}

// BenchReuse is the reuse request of the Decide benchmarks: n slots, every
// third one unverified.
func BenchReuse(n int) *abi.ReuseRequest {
	s := make([]abi.TaskSlot, n)
	for i := range s {
		s[i] = t.Slot(uint32(i), fmt.Sprintf("worker-%03d", i), i%3 != 0, true)
	}
	return t.Reuse(s...)
}
