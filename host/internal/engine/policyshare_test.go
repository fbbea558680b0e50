package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// shareEnv is one redis-server and a PolicySet per namespace, all loading
// through one Share, as a Multi's namespaces do.
type shareEnv struct {
	t    *testing.T
	sh   *Share
	sts  []*storage.Store
	sets []*PolicySet
}

func newShareEnv(t *testing.T, namespaces ...string) *shareEnv {
	t.Helper()
	c := redistest.Start(t).Client(t)
	e := &shareEnv{t: t, sh: NewShare(sharedWasm(t))}
	for _, ns := range namespaces {
		st, err := storage.New(c, ns)
		if err != nil {
			t.Fatal(err)
		}
		s := newPolicySet(st, e.sh, slog.New(slog.DiscardHandler))
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		e.sts, e.sets = append(e.sts, st), append(e.sets, s)
	}
	return e
}

// acquire returns set i's version of name, released at test end.
func (e *shareEnv) acquire(i int, name string) *PolicyRef {
	e.t.Helper()
	r, err := e.sets[i].Acquire(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(r.Release)
	return r
}

// decide runs one priority-shaped decision on p.
func decide(p *policies.Policy) error {
	s := abitest.Snapshot("p", 1, nil, []abi.Run{abitest.Waiting("run-1", 1)})
	_, err := p.DecideSerial(context.Background(), s)
	return err
}

// TestPolicyShare_acquire: the namespaces of one process load a version once
// and keep it until the last of them lets go, including when one namespace
// hot-swaps away from it.
func TestPolicyShare_acquire(t *testing.T) {
	ctx := context.Background()
	t.Run("one Policy for every namespace, closed with the last", func(t *testing.T) {
		e := newShareEnv(t, "sa", "sb")
		a, b := e.acquire(0, "priority"), e.acquire(1, "priority")
		if a == b || a.Policy != b.Policy {
			t.Fatalf("refs %p/%p, policies %p/%p: want two refs on one Policy", a, b, a.Policy, b.Policy)
		}
		if w := e.acquire(1, "wait"); w.Policy == a.Policy {
			t.Fatal("wait and priority share a Policy")
		}
		a.Release()
		if err := e.sets[0].Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := decide(b.Policy); err != nil {
			t.Fatalf("after the first namespace closed: %v", err)
		}
		b.Release()
		if err := e.sets[1].Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := decide(b.Policy); !errors.Is(err, policies.ErrClosed) {
			t.Fatalf("after the last namespace closed: %v, want ErrClosed", err)
		}
		if n := len(e.sh.m); n != 0 {
			t.Fatalf("%d versions left in the share", n)
		}
	})
	t.Run("a hot swap in one namespace keeps the version for the other", func(t *testing.T) {
		e := newShareEnv(t, "sa", "sb")
		a, b := e.acquire(0, "priority"), e.acquire(1, "priority")
		a.Release()
		wasm, _ := plugins.Builtin("wait")
		if _, err := e.sts[0].PushPolicy(ctx, storage.PushRequest{Name: "priority", Kind: "serial", Who: "test", Blob: wasm, Activate: true}); err != nil {
			t.Fatal(err)
		}
		for _, s := range e.sets {
			if _, err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		a2 := e.acquire(0, "priority")
		if a2.Registry != 1 || a2.Policy == b.Policy {
			t.Fatalf("sa resolves priority to registry v%d (same Policy as sb: %t), want v1, its own", a2.Registry, a2.Policy == b.Policy)
		}
		if len(e.sets[0].Loaded()) != 1 {
			t.Fatalf("sa still lists %v", e.sets[0].Loaded())
		}
		if err := decide(b.Policy); err != nil {
			t.Fatalf("sb's built-in after sa swapped away from it: %v", err)
		}
	})
	t.Run("concurrent first acquires load once", func(t *testing.T) {
		e := newShareEnv(t, "s0", "s1", "s2", "s3")
		var wg sync.WaitGroup
		refs := make([]*PolicyRef, 2*len(e.sets))
		errs := make([]error, len(refs))
		for i := range refs {
			wg.Go(func() { refs[i], errs[i] = e.sets[i%len(e.sets)].Acquire(ctx, "discard") })
		}
		wg.Wait()
		for i, r := range refs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			defer r.Release()
			if r.Policy != refs[0].Policy {
				t.Fatalf("acquire %d got another Policy", i)
			}
		}
		if got := e.sh.m["discard@"+refs[0].SHA256].sets; got != len(e.sets) {
			t.Fatalf("share counts %d sets, want %d", got, len(e.sets))
		}
	})
	t.Run("a failed load leaves nothing behind", func(t *testing.T) {
		e := newShareEnv(t, "sa")
		for i := range 2 {
			_, err := e.sh.acquire(ctx, "bad@x", "bad", []byte("not wasm"))
			if !errors.Is(err, policies.ErrNotWasm) {
				t.Fatalf("try %d: %v, want ErrNotWasm", i, err)
			}
			if len(e.sh.m) != 0 {
				t.Fatalf("try %d: share holds %v", i, e.sh.m)
			}
		}
	})
}

// BenchmarkPolicyShare_memory: host heap held by 12 namespaces that each
// decide with the priority, wait and reuse built-ins, with a share per
// namespace (what a Multi did before Share) and one for all.
//
//	go test ./host -run '^$' -bench PolicyShare_memory -benchtime 3x
func BenchmarkPolicyShare_memory(b *testing.B) {
	c := redistest.Start(b).Client(b)
	rt, err := policies.NewRuntime(context.Background(), policies.Config{
		CacheDir: filepath.Join(os.TempDir(), "wasmsched-host-test-wazero"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	for _, shared := range []bool{false, true} {
		b.Run(fmt.Sprintf("shared=%t", shared), func(b *testing.B) {
			var heap float64
			for b.Loop() {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				sh := NewShare(rt)
				var sets []*PolicySet
				for i := range 12 {
					st, _ := storage.New(c, fmt.Sprintf("mem%d", i))
					if !shared {
						sh = NewShare(rt)
					}
					s := newPolicySet(st, sh, slog.New(slog.DiscardHandler))
					for _, name := range []string{"priority", "wait", "reuse"} {
						r, err := s.Acquire(context.Background(), name)
						if err != nil {
							b.Fatal(err)
						}
						r.Release()
					}
					sets = append(sets, s)
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				heap = float64(ms.HeapAlloc-before) / (1 << 20)
				for _, s := range sets {
					_ = s.Close(context.Background())
				}
			}
			b.ReportMetric(heap, "heap-MiB")
		})
	}
}
