package policies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/policies/internal/wasmgen"
)

// The hostile-plugin suite: modules written to break the sandbox
// (testdata/hostile, built by its gen.sh, and bombs built here with
// wasmgen), each held to the bound it must meet.

// heapGrowth returns how many bytes the Go heap allocated during f (the
// cumulative TotalAlloc: what the module made the host allocate, freed or
// not).
func heapGrowth(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// tinyPolicy is a valid minimal policy (no Go runtime) to extend.
func tinyPolicy() []byte {
	b, err := os.ReadFile("../plugins/wat-wait/wat-wait.wasm")
	if err != nil {
		panic(err)
	}
	return b
}

// TestRuntime_Load_hostile: modules that must be refused at load, before
// they cost anything: the error names the problem, Load returns promptly
// and the host allocates little, whatever the module declares.
func TestRuntime_Load_hostile(tt *testing.T) {
	locals := func(n uint32) []byte {
		return wasmgen.Funcs(1, wasmgen.Body([][2]uint32{{n, 0x7F}}, []byte{0x0B}))
	}
	cases := []struct {
		name    string
		wasm    func() []byte
		want    []error
		mention []string
		maxHeap uint64 // bytes the host may allocate to refuse it
	}{
		{"escape-global", hostile("escape-global"), []error{ErrNotWasm}, []string{"invalid module", "global"}, 8 << 20},
		{"escape-call", hostile("escape-call"), []error{ErrNotWasm}, []string{"invalid module", "function"}, 8 << 20},
		{"escape-export", hostile("escape-export"), []error{ErrNotWasm}, []string{"invalid module"}, 8 << 20},
		{"table-grow", hostile("table-grow"), []error{ErrLimit}, []string{"MaxTableSize", "table.grow", "4294967296"}, 1 << 20},
		{"table-huge", hostile("table-huge"), []error{ErrLimit}, []string{"MaxTableSize", "10000000", "table 0"}, 1 << 20},
		{"locals-4G", func() []byte { return locals(1<<32 - 1) }, []error{ErrLimit}, []string{"MaxLocals", "4294967295", "function 0"}, 1 << 20},
		{"locals-16M", func() []byte { return locals(16 << 20) }, []error{ErrLimit}, []string{"MaxLocals", "16777216"}, 1 << 20},
		{"locals-total", func() []byte {
			return wasmgen.Funcs(60, wasmgen.Body([][2]uint32{{maxLocals, 0x7F}}, []byte{0x0B}))
		}, []error{ErrLimit}, []string{"MaxTotalLocals"}, 1 << 20},
		{"nesting-100k", func() []byte { return wasmgen.Funcs(1, wasmgen.Body(nil, wasmgen.Nested(100_000))) },
			[]error{ErrLimit}, []string{"MaxNestingDepth", "2049", "function 0"}, 4 << 20},
		{"functions", func() []byte { return wasmgen.Funcs(maxFunctions+1, wasmgen.Body(nil, []byte{0x0B})) },
			[]error{ErrLimit}, []string{"MaxFunctions", "50001"}, 4 << 20},
		{"oversize-9MiB", func() []byte { return append(append([]byte(nil), tinyPolicy()...), wasmgen.Custom("pad", 9<<20)...) },
			[]error{ErrLimit}, []string{"MaxModuleSize", "8388608"}, 1 << 20},
		{"import-memory", func() []byte {
			imp := wasmgen.Vec(append(append(wasmgen.U32(nil, 3), "env"...), append(wasmgen.U32(nil, 6), "memory\x02\x00\x01"...)...))
			return wasmgen.Module(wasmgen.Section(2, imp))
		}, []error{ErrNotWasm}, []string{`"env"."memory" is a memory`, "wasi_snapshot_preview1"}, 1 << 20},
		{"import-other-module", func() []byte {
			imp := wasmgen.Vec(append(append(wasmgen.U32(nil, 3), "env"...), append(wasmgen.U32(nil, 4), "exit\x00\x00"...)...))
			return wasmgen.Module(wasmgen.Section(1, wasmgen.Vec([]byte{0x60, 0, 0})), wasmgen.Section(2, imp))
		}, []error{ErrNotWasm}, []string{`"env"."exit"`, "only wasi_snapshot_preview1 functions"}, 1 << 20},
		{"loop-abi_version", hostile("loop-abi_version"), []error{ErrInstantiate, ErrTimeout},
			[]string{"wasmsched_abi_version did not return within its deadline of 100ms (Config.CallTimeout)"}, 8 << 20},
		{"loop-kind", hostile("loop-kind"), []error{ErrInstantiate, ErrTimeout},
			[]string{"wasmsched_kind did not return within its deadline of 100ms (Config.CallTimeout)"}, 8 << 20},
		{"loop-_initialize", hostile("loop-_initialize"), []error{ErrInstantiate, ErrTimeout},
			[]string{"_initialize did not return within its deadline of 200ms (Config.InitTimeout)"}, 8 << 20},
	}
	rt := newRT(tt, Config{CallTimeout: 100 * time.Millisecond, InitTimeout: 200 * time.Millisecond})
	for _, c := range cases {
		tt.Run(c.name, func(tt *testing.T) {
			wasm := c.wasm()
			var err error
			start := time.Now()
			heap := heapGrowth(func() {
				var p *Policy
				if p, err = rt.Load(context.Background(), c.name, wasm); p != nil {
					_ = p.Close(context.Background())
				}
			})
			el := time.Since(start)
			for _, w := range c.want {
				if !errors.Is(err, w) {
					tt.Fatalf("err = %v, want %v", err, w)
				}
			}
			for _, m := range append(c.mention, fmt.Sprintf("%q", c.name)) {
				if !strings.Contains(err.Error(), m) {
					tt.Errorf("error %q does not mention %q", err, m)
				}
			}
			if strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "wasm stack trace") {
				tt.Errorf("error %q reports a deadline or limit as a trap", err)
			}
			if heap > c.maxHeap+uint64(len(wasm)) {
				tt.Errorf("refusing it allocated %d bytes of host heap, bound %d", heap, c.maxHeap)
			}
			if el > 5*time.Second {
				tt.Errorf("refusing it took %v", el)
			}
			tt.Logf("%v, %d bytes of heap: %v", el.Round(time.Millisecond), heap, err)
		})
	}
}

func hostile(name string) func() []byte {
	return func() []byte {
		b, err := os.ReadFile("testdata/hostile/" + name + ".wasm")
		if err != nil {
			panic(err)
		}
		return b
	}
}

// TestRuntime_Load_compileTimeout: a module within every static limit
// that takes long to compile (many functions at the nesting limit; about
// 30 ms each) is refused when compiling exceeds Config.CompileTimeout, and
// the abandoned compile stops by itself soon after.
func TestRuntime_Load_compileTimeout(tt *testing.T) {
	wasm := wasmgen.Funcs(400, wasmgen.Body(nil, wasmgen.Nested(maxNestingDepth)))
	if err := CheckLimits(Config{}, "slow", wasm); err != nil {
		tt.Fatalf("the module must be within the static limits: %v", err)
	}
	const timeout = 300 * time.Millisecond
	rt, err := NewRuntime(context.Background(), Config{CompileTimeout: timeout, CacheDir: "-"})
	if err != nil {
		tt.Fatal(err)
	}
	defer rt.Close(context.Background())
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	_, err = rt.Load(context.Background(), "slow", wasm)
	el := time.Since(start)
	if !errors.Is(err, ErrCompileTimeout) || !strings.Contains(err.Error(), "Config.CompileTimeout") || !strings.Contains(err.Error(), `"slow"`) {
		tt.Fatalf("err = %v, want ErrCompileTimeout naming the policy and the knob", err)
	}
	// Returns at the deadline (plus scheduling), not after the compile.
	if el > timeout+2*time.Second {
		tt.Fatalf("Load returned after %v for a %v compile deadline", el, timeout)
	}
	// The abandoned compile stops at its next function.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		tt.Fatalf("%d goroutines after the timed-out compile, %d before", n, goroutines)
	}
	tt.Logf("refused after %v", el.Round(time.Millisecond))
}

// withinDeadline fails unless call returns ErrTimeout, saying the deadline
// was exceeded, and ends long before the module would have run without the
// deadline (each of these modules runs for seconds to minutes unchecked).
// The bound, 20x the deadline + 1 s, catches a deadline that does not hold;
// it is not a latency target (the machines are shared and noisy): how soon
// after the deadline a call ends is measured by BenchmarkDeadline.
func withinDeadline(tt *testing.T, deadline time.Duration, call func() error) {
	tt.Helper()
	bound := 20*deadline + time.Second
	start := time.Now()
	err := call()
	el := time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		tt.Fatalf("err = %v, want ErrTimeout", err)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("did not return within its deadline of %v", deadline)) || strings.Contains(msg, "unreachable") {
		tt.Fatalf("error %q does not say the deadline was exceeded", msg)
	}
	if el > bound {
		tt.Fatalf("the call returned after %v: the %v deadline did not stop the module (bound %v)", el, deadline, bound)
	}
	tt.Logf("returned after %v", el.Round(100*time.Microsecond))
}

// TestPolicy_DecideSerial_hostileDeadline: the deadline holds for code that
// no function-entry or loop-header check sees: straight-line bulk memory
// instructions and WASI calls, each of which alone runs for milliseconds
// (2000 memory.fill of 32 MiB ran 17-26 s for a 50 ms deadline before the
// checks before them), and an export looping where the host calls it
// mid-decision (wasmsched_input).
func TestPolicy_DecideSerial_hostileDeadline(tt *testing.T) {
	skipUnderRace(tt)
	const deadline = 50 * time.Millisecond
	rt := newRT(tt, Config{CallTimeout: deadline})
	for _, name := range []string{"bulk-fill", "bulk-copy", "wasi-random", "wasi-write", "loop-input", "straight-loop"} {
		tt.Run(name, func(tt *testing.T) {
			p := load(tt, rt, name, hostile(name)())
			withinDeadline(tt, deadline, func() error {
				_, err := p.DecideSerial(context.Background(), mode(1))
				return err
			})
		})
	}
}

// TestPolicy_DecideAllocation_hostileDeadline: the straight-line fill bomb
// as an allocation policy (the slot manager calls one in every pass of its
// namespace) ends at its deadline as the serial one does, call after call
// (each on a fresh instance).
func TestPolicy_DecideAllocation_hostileDeadline(tt *testing.T) {
	skipUnderRace(tt)
	const deadline = 50 * time.Millisecond
	rt := newRT(tt, Config{CallTimeout: deadline})
	p := load(tt, rt, "alloc-fill", hostile("alloc-fill")())
	snap := &abi.AllocationSnapshot{Now: 1, Free: 1, Total: 1, LaunchedTotal: 1, Oldest: 1, Runs: []abi.AllocRun{{ID: "a", Slots: 1}}}
	for range 3 {
		withinDeadline(tt, deadline, func() error {
			_, err := p.DecideAllocation(context.Background(), snap)
			return err
		})
	}
}

// TestPolicy_DecideSerial_amplification: a decision's bytes cannot make
// the host allocate more than the snapshot allows: an action count far
// above the snapshot's runs, and overlapping 9 MiB reasons or run ids, are
// rejected without copying them, and the error quotes a bounded part.
func TestPolicy_DecideSerial_amplification(tt *testing.T) {
	rt := newRT(tt, Config{})
	for _, c := range []struct {
		name, problem string
	}{
		{"amplify-count", "1670000 actions for a snapshot of 3 runs"},
		{"amplify-reasons", "reason of 9437184 bytes exceeds 256"},
		{"amplify-ids", "unknown run (not in the snapshot)"},
	} {
		tt.Run(c.name, func(tt *testing.T) {
			p := load(tt, rt, c.name, hostile(c.name)())
			var d abi.SerialDecision
			var err error
			// A rejected decision throws its instance away: start one
			// first (its 32 MiB memory is the guest's, bounded by the
			// cap), then measure what the decision alone allocates.
			inst, err := p.acquire(context.Background())
			if err != nil {
				tt.Fatal(err)
			}
			p.release(inst, true)
			heap := heapGrowth(func() { d, err = p.DecideSerial(context.Background(), mode(1)) })
			if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), c.problem) {
				tt.Fatalf("err = %v, want an invalid decision: %s", err, c.problem)
			}
			if n := len(err.Error()); n > 2048 {
				tt.Fatalf("error of %d bytes: %.300s...", n, err)
			}
			size := 0
			for _, a := range d.Actions {
				size += len(a.Run) + len(a.Reason)
			}
			if size > 3*(maxQuotedID+MaxReasonLen) {
				tt.Fatalf("the rejected decision holds %d bytes of strings", size)
			}
			// The snapshot is a few hundred bytes; the guest's output 9-32 MiB.
			if heap > 256<<10 {
				tt.Fatalf("one decision allocated %d bytes of host heap", heap)
			}
			tt.Logf("%d bytes of heap; %v", heap, err)
		})
	}
}

// TestPolicy_DecideSerial_problemsBounded: at most maxProblems problems
// are listed, the rest counted.
func TestPolicy_DecideSerial_problemsBounded(tt *testing.T) {
	var waiting []abi.Run
	for i := range 40 {
		waiting = append(waiting, t.Waiting(fmt.Sprintf("w%02d", i), uint64(i+1)))
	}
	s := t.Snapshot("x", 1, nil, waiting)
	d := abi.SerialDecision{}
	for i := range 40 {
		d.Actions = append(d.Actions, abi.Action{Kind: abi.ActionStop, Run: fmt.Sprintf("w%02d", i)})
	}
	err := ValidateSerial(s, &d)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != maxProblems || ve.More != 40-maxProblems {
		tt.Fatalf("err = %v, want %d problems listed and %d more", err, maxProblems, 40-maxProblems)
	}
	if !strings.HasSuffix(err.Error(), fmt.Sprintf("and %d more problem(s)", 40-maxProblems)) {
		tt.Fatalf("err = %v", err)
	}
}

// TestPolicy_DecideSerial_hostileStopTheWorld: the same modules must not
// hold up a stop-the-world (GC) while they run: compiled guest code is
// not preemptible, so a guest must exit to Go often, not only every
// YieldEvery checks (a 32 MiB memory.fill, or a loop over almost 1 MiB of
// straight-line code, is charged for what it does).
func TestPolicy_DecideSerial_hostileStopTheWorld(tt *testing.T) {
	// A GC of this test binary takes a few ms on a quiet machine; the bound
	// leaves room for a loaded one. Without the charges a GC waited
	// seconds here (the guest ran its 2000 fills to the end).
	const gcBound = 200 * time.Millisecond
	rt := newRT(tt, Config{CallTimeout: 300 * time.Millisecond})
	for _, name := range []string{"bulk-fill", "bulk-copy", "straight-loop"} {
		tt.Run(name, func(tt *testing.T) {
			p := load(tt, rt, name, hostile(name)())
			best := time.Hour
			for range 3 {
				gcDone := make(chan time.Duration, 1)
				go func() {
					time.Sleep(50 * time.Millisecond) // the guest is running by now
					start := time.Now()
					runtime.GC()
					gcDone <- time.Since(start)
				}()
				if _, err := p.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrTimeout) {
					tt.Fatalf("err = %v, want ErrTimeout", err)
				}
				best = min(best, <-gcDone)
				if best < gcBound {
					break
				}
			}
			if best >= gcBound {
				tt.Fatalf("runtime.GC took %v (best of 3) while the guest ran: it held up stop-the-world", best)
			}
			tt.Logf("runtime.GC took %v while the guest ran", best)
		})
	}
}

// TestHostileWasmIsReproducible: the committed hostile modules are what
// gen.sh builds from their source (wat2wasm from Debian's wabt; CI
// installs it).
func TestHostileWasmIsReproducible(tt *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		tt.Skip("wat2wasm not installed (Debian package wabt)")
	}
	out := tt.TempDir()
	cmd := exec.Command("sh", "policies/testdata/hostile/gen.sh", out)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		tt.Fatalf("gen.sh: %v\n%s", err, b)
	}
	built, err := filepath.Glob(filepath.Join(out, "*.wasm"))
	if err != nil || len(built) < 15 {
		tt.Fatalf("gen.sh built %d modules (%v)", len(built), err)
	}
	for _, f := range built {
		want, err := os.ReadFile(filepath.Join("testdata/hostile", filepath.Base(f)))
		if err != nil {
			tt.Fatalf("%s is built but not committed: %v", filepath.Base(f), err)
		}
		if got, _ := os.ReadFile(f); !bytes.Equal(got, want) {
			tt.Errorf("testdata/hostile/%s differs from what gen.sh builds: run policies/testdata/hostile/gen.sh", filepath.Base(f))
		}
	}
}

// TestPolicy_DecideSerial_canceled: with a long deadline (an author trying
// a large snapshot offline), cancelling the caller's context stops the
// guest at once and is reported as a cancellation, not a timeout.
func TestPolicy_DecideSerial_canceled(tt *testing.T) {
	rt := newRT(tt, Config{CallTimeout: time.Hour})
	p := load(tt, rt, "bulk-fill", hostile("bulk-fill")())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := p.DecideSerial(ctx, mode(1))
	if el := time.Since(start); el > 5*time.Second {
		tt.Fatalf("returned %v after the cancel", el)
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "call canceled") {
		tt.Fatalf("err = %v, want a cancellation", err)
	}
}

// BenchmarkDeadline measures how long a decide call of a hostile module
// takes against its 50 ms deadline (the overshoot is what the deadline
// checks cost the guest to notice): ns/op is the whole call.
//
//	go test ./policies -run '^$' -bench Deadline -benchtime 5x
func BenchmarkDeadline(b *testing.B) {
	const deadline = 50 * time.Millisecond
	for _, name := range []string{"bulk-fill", "wasi-write", "straight-loop"} {
		b.Run(name, func(b *testing.B) {
			rt, err := NewRuntime(context.Background(), Config{CallTimeout: deadline})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(context.Background())
			p, err := rt.Load(context.Background(), name, hostile(name)())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			b.ResetTimer()
			for range b.N {
				if _, err := p.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrTimeout) {
					b.Fatalf("err = %v, want ErrTimeout", err)
				}
			}
		})
	}
}
