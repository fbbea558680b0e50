package policies

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/abicodec"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies/internal/wasmrewrite"
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

// BenchmarkGuestFloor splits a priority decision over the snapshot of the
// plugins' BenchmarkDecide (max_active 2, one RUNNING and 16 WAITING runs)
// into what the Go guest alone costs, with no host work around it:
//
//   - policy: the policy's DecideSerial on an already-decoded snapshot,
//     run k times inside one guest call: exactly the work the native
//     benchmark (priority/native/waiting=16) times, as wasm.
//   - decode: abicodec.DecodeSerialSnapshotView of the 17 runs, k times per call.
//   - encode: the SDK's in-place encoding of the 17 actions, k times.
//   - call: one wasmsched_decide per iteration (decode, policy, in-place
//     encode) on input already in guest memory: no snapshot encode, no
//     copy, no decode or validation of the result.
//
// Each runs on the plain module (deadline=off) and on the module as the
// runtime loads it, with the inline deadline checks (deadline=inline). The
// metric is ns/decision. BENCHMARKS.md reads the figures against the native
// call.
func BenchmarkGuestFloor(b *testing.B) {
	const k = 1000 // decisions per guest call, except for call
	fg := newFloorGuest(b)
	for _, mode := range fg.modes {
		for _, fe := range floorExports {
			b.Run(fmt.Sprintf("%s/deadline=%s", fe.name, mode.name), func(b *testing.B) {
				per := k
				if fe.export == exportDecide {
					per = 1
				}
				f := mode.mod.ExportedFunction(fe.export) // once: each lookup makes a new call engine
				calls := 0
				for b.Loop() {
					fg.call(b, f, fe, per)
					calls++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(calls*per), "ns/decision")
			})
		}
	}
}

// TestGuestFloor_exports keeps BenchmarkGuestFloor honest: the floor build
// of the priority plugin still builds, each measurement export does the work
// it names on both module variants, and the decision they time is the
// built-in's.
func TestGuestFloor_exports(t *testing.T) {
	skipUnderRace(t)
	fg := newFloorGuest(t)
	for _, mode := range fg.modes {
		for _, fe := range floorExports {
			t.Run(fmt.Sprintf("%s/deadline=%s", fe.name, mode.name), func(t *testing.T) {
				fg.call(t, mode.mod.ExportedFunction(fe.export), fe, 3)
			})
		}
	}
	rt := newRT(t, Config{})
	wasm, _ := plugins.Builtin("priority")
	want, err := load(t, rt, "priority", wasm).DecideSerial(context.Background(), fg.snap)
	if err != nil {
		t.Fatal(err)
	}
	got, err := load(t, rt, "priority-floor", fg.wasm).DecideSerial(context.Background(), fg.snap)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Actions) != fmt.Sprint(want.Actions) || len(want.Actions) != 17 {
		t.Fatalf("floor build decides %v, built-in %v", got.Actions, want.Actions)
	}
}

// floorExports are the measurement exports of abi/sdk/exports_floor_wasip1.go
// and the ABI's decide, with what each returns on the floor snapshot.
var floorExports = []floorExport{
	{"policy", "wasmsched_floor_policy", func(r uint64) bool { return r == 17 }},           // actions
	{"decode", "wasmsched_floor_decode", func(r uint64) bool { return r == 17 }},           // runs
	{"encode", "wasmsched_floor_encode", func(r uint64) bool { return r > 17*20 }},         // record bytes
	{"call", exportDecide, func(r uint64) bool { return r>>32 != 0 && uint32(r) > 17*20 }}, // ptr<<32 | len
}

type floorExport struct {
	name, export string
	want         func(res uint64) bool
}

type floorGuest struct {
	wasm  []byte // the floor build, as a plugin
	snap  *abi.SerialSnapshot
	in    []byte
	modes []floorModule
}

type floorModule struct {
	name string
	mod  api.Module
}

// newFloorGuest builds plugins/priority with -tags wasmsched_floor and
// instantiates it twice on a plain wazero runtime: as built (deadline=off)
// and with the runtime's inline deadline checks (deadline=inline), each
// with the floor snapshot in its input buffer.
func newFloorGuest(tb testing.TB) *floorGuest {
	tb.Helper()
	ctx := context.Background()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("go command not found")
	}
	out := filepath.Join(tb.TempDir(), "priority-floor.wasm")
	build := exec.Command(goCmd, "build", "-buildmode=c-shared", "-trimpath", "-tags", "wasmsched_floor", "-o", out, "../plugins/priority")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building the floor guest: %v\n%s", err, b)
	}
	fg := &floorGuest{wasm: readFile(tb, out)}
	checked, _, err := wasmrewrite.Rewrite(fg.wasm)
	if err != nil {
		tb.Fatal(err)
	}
	var waiting []abi.Run
	for i := range 16 {
		waiting = append(waiting, abitest.Waiting(fmt.Sprintf("run-%06d", i+2), uint64(i+2)))
	}
	fg.snap = abitest.Snapshot("priority", 2, []abi.Run{abitest.Running("run-000001", 1)}, waiting)
	fg.in = abicodec.AppendSerialSnapshotFor(nil, fg.snap, abi.Version) // the Go SDK's version

	cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		tb.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	tb.Cleanup(func() { _ = rt.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	for _, v := range []struct {
		name string
		wasm []byte
	}{{"off", fg.wasm}, {"inline", checked}} {
		c, err := rt.CompileModule(ctx, v.wasm)
		if err != nil {
			tb.Fatal(err)
		}
		mod, err := rt.InstantiateModule(ctx, c, wazero.NewModuleConfig().
			WithName("").WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime())
		if err != nil {
			tb.Fatal(err)
		}
		res, err := mod.ExportedFunction(exportInput).Call(ctx, uint64(len(fg.in)))
		if err != nil || !mod.Memory().Write(uint32(res[0]), fg.in) {
			tb.Fatalf("input buffer: %v", err)
		}
		fg.modes = append(fg.modes, floorModule{v.name, mod})
	}
	return fg
}

// call runs f, export fe, once over the floor snapshot (per decisions
// inside the call where the export loops) and checks its result.
func (fg *floorGuest) call(tb testing.TB, f api.Function, fe floorExport, per int) {
	stack := [2]uint64{uint64(len(fg.in)), uint64(per)}
	if err := f.CallWithStack(context.Background(), stack[:]); err != nil {
		tb.Fatal(err)
	}
	if !fe.want(stack[0]) {
		tb.Fatalf("%s returned %#x", fe.export, stack[0])
	}
}
