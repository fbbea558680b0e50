package policies

import (
	"context"
	"os"
	"testing"
)

var (
	cacheDir  string
	sharedRTs = map[string]*Runtime{}
)

// TestMain gives the test binary one compilation cache in a temp dir, so
// each plugin compiles once (cold) per binary and warm afterwards.
func TestMain(m *testing.M) {
	var err error
	cacheDir, err = os.MkdirTemp("", "wasmsched-policies-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	for _, rt := range sharedRTs {
		_ = rt.Close(context.Background())
	}
	_ = os.RemoveAll(cacheDir)
	os.Exit(code)
}

// newRT returns a runtime on the shared cache, closed at test end.
func newRT(tb testing.TB, cfg Config) *Runtime {
	tb.Helper()
	cfg.CacheDir = cacheDir
	rt, err := NewRuntime(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func load(tb testing.TB, rt *Runtime, name string, wasm []byte) *Policy {
	tb.Helper()
	p, err := rt.Load(context.Background(), name, wasm)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// idle returns p's idle instances, the one used last first: call it with
// no call in flight.
func idle(p *Policy) []*instance {
	var out []*instance
	if inst := p.hot.Load(); inst != nil {
		out = append(out, inst)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(out, p.free...)
}
