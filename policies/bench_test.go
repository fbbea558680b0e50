package policies

import (
	"context"
	"os"
	"testing"

	"github.com/wasmsched/wasmsched/plugins"
)

// BenchmarkCompile measures Load (compile + check + one instance) of the
// priority plugin with a cold (fresh dir) and a warm compilation cache.
func BenchmarkCompile(b *testing.B) {
	wasm, _ := plugins.Builtin("priority")
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			dir, _ := os.MkdirTemp("", "bench-cold-")
			rt, err := NewRuntime(ctx, Config{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			p, err := rt.Load(ctx, "priority", wasm)
			if err != nil {
				b.Fatal(err)
			}
			_ = p.Close(ctx)
			_ = rt.Close(ctx)
			_ = os.RemoveAll(dir)
		}
	})
	b.Run("warm", func(b *testing.B) {
		dir := b.TempDir()
		warm, _ := NewRuntime(ctx, Config{CacheDir: dir})
		p, _ := warm.Load(ctx, "priority", wasm)
		_ = p.Close(ctx)
		_ = warm.Close(ctx)
		for b.Loop() {
			rt, err := NewRuntime(ctx, Config{CacheDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			p, err := rt.Load(ctx, "priority", wasm)
			if err != nil {
				b.Fatal(err)
			}
			_ = p.Close(ctx)
			_ = rt.Close(ctx)
		}
	})
}

// BenchmarkInstantiate measures one new pool instance (incl. the Go guest's
// _initialize).
func BenchmarkInstantiate(b *testing.B) {
	rt := newRT(b, Config{})
	wasm, _ := plugins.Builtin("priority")
	p := load(b, rt, "priority", wasm)
	ctx := context.Background()
	for b.Loop() {
		inst, err := p.newInstance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		inst.close()
	}
}
