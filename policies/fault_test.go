package policies

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

func TestLoadErrors(tt *testing.T) {
	rt := newRT(tt, Config{})
	cases := []struct {
		name    string
		wasm    []byte
		want    error
		mention []string
	}{
		{"text", []byte("hello, I am not wasm"), ErrNotWasm, []string{"magic"}},
		{"empty", nil, ErrNotWasm, []string{"0 bytes"}},
		{"component", []byte("\x00asm\x0d\x00\x01\x00"), ErrNotWasm, []string{"binary format version"}},
		{"truncated", []byte("\x00asm\x01\x00\x00\x00\x01\xff"), ErrNotWasm, []string{"malformed module"}},
		{"badversion", readFile(tt, "testdata/badversion.wasm"), ErrABIVersion, []string{"version 99", "supports 1 to 6"}},
		{"badkind", readFile(tt, "testdata/badkind.wasm"), ErrKind, []string{"kind 7"}},
		{"missing", readFile(tt, "testdata/missing.wasm"), ErrMissingExport, []string{"wasmsched_input", "wasmsched_decide"}},
		{"badsig", readFile(tt, "testdata/badsig.wasm"), ErrMissingExport, []string{"wasmsched_decide has signature (i32)->(i32), want (i32)->(i64)"}},
	}
	for _, c := range cases {
		tt.Run(c.name, func(tt *testing.T) {
			p, err := rt.Load(context.Background(), c.name, c.wasm)
			if !errors.Is(err, c.want) {
				if p != nil {
					_ = p.Close(context.Background())
				}
				tt.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, m := range append(c.mention, `"`+c.name+`"`) {
				if !strings.Contains(err.Error(), m) {
					tt.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func faulty(tb testing.TB, cfg Config) *Policy {
	return load(tb, newRT(tb, cfg), "faulty", readFile(tb, "testdata/faulty/faulty.wasm"))
}

// mode picks the faulty plugin's behaviour (see testdata/faulty/main.go).
func mode(m uint32) *abi.SerialSnapshot {
	return t.Snapshot("faulty", m, []abi.Run{t.Running("r1", 1)}, []abi.Run{t.Waiting("r2", 2), t.Waiting("r3", 3)})
}

func mustWork(tb testing.TB, p *Policy) {
	tb.Helper()
	d, err := p.DecideSerial(context.Background(), mode(2))
	if err != nil {
		tb.Fatalf("call after a fault: %v", err)
	}
	if len(d.Actions) != 1 || d.Actions[0].Run != "r2" {
		tb.Fatalf("call after a fault: %+v", d)
	}
}

var terminationModes = []string{TerminationInline, TerminationWazero}

// TestInfiniteLoopStoppedByDeadline covers both termination modes: a Go
// loop, a pure-wasm loop, recursion without any loop (function-entry
// checks only; inline mode) and a guest that sleeps through WASI.
func TestInfiniteLoopStoppedByDeadline(tt *testing.T) {
	skipUnderRace(tt)
	for _, m := range terminationModes {
		tt.Run(m, func(tt *testing.T) {
			p := faulty(tt, Config{CallTimeout: 100 * time.Millisecond, Termination: m})
			for range 2 {
				start := time.Now()
				_, err := p.DecideSerial(context.Background(), mode(99))
				if !errors.Is(err, ErrTimeout) {
					tt.Fatalf("err = %v, want ErrTimeout", err)
				}
				if el := time.Since(start); el > 5*time.Second {
					tt.Fatalf("deadline took %v", el)
				}
				mustWork(tt, p)
			}
			for _, name := range []string{"loop", "calls", "sleep"} {
				if name == "calls" && m == TerminationWazero {
					// wazero (1.12) checks for termination at loop headers
					// only, not at function entry: recursion without a loop
					// is not stopped in that mode. Inline mode checks both.
					continue
				}
				pl := load(tt, p.rt, name, readFile(tt, "testdata/"+name+".wasm"))
				for range 2 {
					start := time.Now()
					if _, err := pl.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrTimeout) {
						tt.Fatalf("%s.wat: err = %v, want ErrTimeout", name, err)
					}
					if el := time.Since(start); el > 2*time.Second {
						tt.Fatalf("%s.wat: deadline took %v", name, el)
					}
				}
			}
		})
	}
}

func TestPanicThrowsInstanceAway(tt *testing.T) {
	skipUnderRace(tt)
	for _, m := range terminationModes {
		tt.Run(m, func(tt *testing.T) { testPanicThrowsInstanceAway(tt, m) })
	}
}

func testPanicThrowsInstanceAway(tt *testing.T, m string) {
	var logs strings.Builder
	p := faulty(tt, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Termination: m})
	for range 2 {
		_, err := p.DecideSerial(context.Background(), mode(98))
		if !errors.Is(err, ErrTrap) {
			tt.Fatalf("err = %v, want ErrTrap", err)
		}
		if !strings.Contains(err.Error(), "deliberate panic in group g") {
			tt.Fatalf("guest stderr not in error: %v", err)
		}
		mustWork(tt, p)
	}
	if !strings.Contains(logs.String(), "deliberate panic") {
		tt.Fatalf("guest stderr not logged: %s", logs.String())
	}
}

func TestMemoryBombHitsCap(tt *testing.T) {
	skipUnderRace(tt)
	for _, m := range terminationModes {
		tt.Run(m, func(tt *testing.T) { testMemoryBombHitsCap(tt, m) })
	}
}

func testMemoryBombHitsCap(tt *testing.T, m string) {
	const limit = 16 << 20
	p := faulty(tt, Config{MemoryLimit: limit, CallTimeout: 5 * time.Second, Termination: m})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 3 {
		_, err := p.DecideSerial(context.Background(), mode(97))
		if !errors.Is(err, ErrTrap) {
			tt.Fatalf("err = %v, want ErrTrap", err)
		}
		mustWork(tt, p)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 8*limit {
		tt.Fatalf("host heap grew by %d bytes after 3 bombs", grown)
	}
	for _, inst := range idle(p) {
		if inst.mem.Size() > limit {
			tt.Fatalf("instance memory %d above cap %d", inst.mem.Size(), limit)
		}
	}
}

func TestInvalidDecisionRejected(tt *testing.T) {
	p := faulty(tt, Config{})
	// four runs: mode 96 returns four actions (at most one per run passes the count check)
	s := t.Snapshot("faulty", 96, []abi.Run{t.Running("r1", 1)}, []abi.Run{t.Waiting("r2", 2), t.Waiting("r3", 3), t.Waiting("r4", 4)})
	_, err := p.DecideSerial(context.Background(), s)
	if !errors.Is(err, ErrInvalidDecision) {
		tt.Fatalf("err = %v, want ErrInvalidDecision", err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		tt.Fatalf("not a *ValidationError: %T", err)
	}
	all := strings.Join(ve.Problems, "\n")
	for _, m := range []string{`launch "ghost": unknown run`, `launch "r1": run is RUNNING, not WAITING`, `stop "r2": run already has action 2 (discard)`} {
		if !strings.Contains(all, m) {
			tt.Errorf("problems lack %q:\n%s", m, all)
		}
	}
	mustWork(tt, p)
}

// TestPolicy_DecideSerial_runResolution: the host maps each action to its
// run by the id's bytes (the hash index of the snapshot), wherever the
// guest's string lies: out-of-order names, ids copied elsewhere and an id
// the guest rewrote in its input buffer all resolve to what the bytes say.
func TestPolicy_DecideSerial_runResolution(tt *testing.T) {
	p := faulty(tt, Config{})
	for _, tc := range []struct {
		name    string
		mode    uint32
		want    []string // launched runs, in order
		problem string   // a validation problem instead
	}{
		{"in order", 3, []string{"r2", "r3"}, ""},
		{"newest first", 94, []string{"r3", "r2"}, ""},
		{"copied ids", 93, []string{"r2", "r3"}, ""},
		{"id rewritten in the input", 92, nil, `launch "X2": unknown run`},
	} {
		tt.Run(tc.name, func(tt *testing.T) {
			s := t.Snapshot("faulty", tc.mode, []abi.Run{t.Running("r1", 1)}, []abi.Run{t.Waiting("r2", 2), t.Waiting("r3", 3)})
			d, err := p.DecideSerial(context.Background(), s)
			if tc.problem != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || !strings.Contains(strings.Join(ve.Problems, "\n"), tc.problem) {
					tt.Fatalf("err = %v, want a validation problem %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				tt.Fatal(err)
			}
			var got []string
			for _, a := range d.Actions {
				if a.Kind != abi.ActionLaunch {
					tt.Fatalf("action %+v, want launches only", a)
				}
				got = append(got, a.Run)
			}
			if !slices.Equal(got, tc.want) {
				tt.Fatalf("launched %v, want %v", got, tc.want)
			}
		})
	}
}

// Reasons are interned by guest address within one call only: the SDK
// writes each call's reasons at the same place in guest memory, so two
// calls with different reasons of one length must still differ.
func TestPolicy_DecideSerial_reasonsPerCall(tt *testing.T) {
	p := faulty(tt, Config{})
	for _, g := range []string{"ga", "gb", "ga"} {
		s := t.Snapshot("faulty", 91, nil, []abi.Run{t.Waiting("r2", 2)})
		s.Group = g
		d, err := p.DecideSerial(context.Background(), s)
		if err != nil {
			tt.Fatal(err)
		}
		if len(d.Actions) != 1 || d.Actions[0].Reason != g {
			tt.Fatalf("group %s: %+v, want one launch with reason %q", g, d.Actions, g)
		}
	}
}

// TestPolicy_DecideSerial/v1-discard-below: a module exporting ABI version 1
// loads (the host supports 1 to 3), and its discard_below, an action of
// version 2, makes the decision invalid; the same decision from the newest
// ABI is valid (ValidateSerial).
func TestPolicy_DecideSerial_v1DiscardBelow(tt *testing.T) {
	p := load(tt, newRT(tt, Config{}), "v1below", readFile(tt, "testdata/v1below.wasm"))
	if p.ABIVersion() != 1 {
		tt.Fatalf("ABIVersion %d, want 1", p.ABIVersion())
	}
	s := t.Snapshot("v1below", 1, nil, []abi.Run{t.Waiting("r1", 1), t.Waiting("r2", 2)})
	_, err := p.DecideSerial(context.Background(), s)
	if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), "discard_below 2: needs ABI version 2 (the policy exports version 1)") {
		tt.Fatalf("err = %v", err)
	}
	if err := ValidateSerial(s, &abi.SerialDecision{Below: 2}); err != nil {
		tt.Fatalf("the same decision at the newest ABI: %v", err)
	}
}

// TestPolicy_DecideSerial_indexed: a decision in the indexed form (ABI v3,
// abicodec.DecisionRunIndex) names runs by their snapshot index; the host
// resolves them to the snapshot's ids and checks them as it checks ids. The
// echo plugins return whatever record the snapshot's policy field holds.
func TestPolicy_DecideSerial_indexed(tt *testing.T) {
	rt := newRT(tt, Config{})
	v3 := load(tt, rt, "echo-v3", readFile(tt, "testdata/echo-v3.wasm"))
	v2 := load(tt, rt, "echo-v2", readFile(tt, "testdata/echo-v2.wasm"))
	if v3.ABIVersion() != 3 || v2.ABIVersion() != 2 {
		tt.Fatalf("ABI versions %d, %d", v3.ABIVersion(), v2.ABIVersion())
	}
	// runs: 0 active a0 (RUNNING), 1 and 2 waiting w1, w2
	snap := func(rec []byte) *abi.SerialSnapshot {
		return t.Snapshot(string(rec), 2, []abi.Run{t.Running("a0", 1)}, []abi.Run{t.Waiting("w1", 2), t.Waiting("w2", 3)})
	}
	acts := func(a ...abi.Action) *abi.SerialDecision { return &abi.SerialDecision{Actions: a} }
	launch := abi.Action{Kind: abi.ActionLaunch, Reason: "go"}
	stop := abi.Action{Kind: abi.ActionStop, Reason: "old"}
	flags := func(rec []byte, f uint32) []byte { binary.LittleEndian.PutUint32(rec[8:], f); return rec }
	for _, c := range []struct {
		name string
		p    *Policy
		rec  []byte
		want string // the decision's actions, or the error it must contain
	}{
		{"launch-and-stop", v3, abicodec.AppendSerialDecisionRefs(nil, acts(launch, stop), []uint32{2, 0}), "[{launch w2 go} {stop a0 old}]"},
		{"with-discard-below", v3, abicodec.AppendSerialDecisionRefs(nil, &abi.SerialDecision{Actions: []abi.Action{launch}, Below: 3, BelowReason: "x"}, []uint32{2}), "[{launch w2 go}]"},
		{"by-id-still-works", v3, abicodec.AppendSerialDecision(nil, acts(abi.Action{Kind: abi.ActionLaunch, Run: "w1", Reason: "go"})), "[{launch w1 go}]"},
		{"out-of-range", v3, abicodec.AppendSerialDecisionRefs(nil, acts(launch), []uint32{3}), "action 0: launch of run index 3: no such run (the snapshot has 3)"},
		{"huge-index", v3, abicodec.AppendSerialDecisionRefs(nil, acts(launch), []uint32{1 << 31}), "run index 2147483648: no such run"},
		{"twice", v3, abicodec.AppendSerialDecisionRefs(nil, acts(launch, launch), []uint32{1, 1}), `action 1: launch "w1": run already has action 0 (launch)`},
		{"wrong-state", v3, abicodec.AppendSerialDecisionRefs(nil, acts(launch), []uint32{0}), `action 0: launch "a0": run is RUNNING, not WAITING`},
		{"unknown-flag", v3, flags(abicodec.AppendSerialDecision(nil, acts()), 2), "undecodable output: abi: malformed record: decision flags 0x2"},
		{"from-v2", v2, abicodec.AppendSerialDecisionRefs(nil, acts(launch), []uint32{1}), "the decision names its runs by index: needs ABI version 3 (the policy exports version 2)"},
	} {
		tt.Run(c.name, func(tt *testing.T) {
			d, err := c.p.DecideSerial(context.Background(), snap(c.rec))
			if strings.HasPrefix(c.want, "[") {
				if err != nil || fmt.Sprint(d.Actions) != c.want {
					tt.Fatalf("got %v, %v; want %s", d.Actions, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), c.want) {
				tt.Fatalf("err = %v, want ErrInvalidDecision with %q", err, c.want)
			}
		})
	}
}

func TestBadOutputTraps(tt *testing.T) {
	p := load(tt, newRT(tt, Config{}), "oob", readFile(tt, "testdata/oob.wasm"))
	if _, err := p.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "outside guest memory") {
		tt.Fatalf("err = %v", err)
	}
}

func TestGuestOutputCapturedAndBounded(tt *testing.T) {
	r := &ring{max: 8} // head 2 bytes, tail 6
	r.Write([]byte("hello "))
	if got := r.String(); got != "hello " {
		tt.Fatalf("ring = %q", got)
	}
	r.Write([]byte("world"))
	if got := r.String(); got != "he\n...\n world" {
		tt.Fatalf("ring = %q", got)
	}
	r.Write([]byte("0123456789abc"))
	if got := r.String(); got != "he\n...\n789abc" {
		tt.Fatalf("ring = %q", got)
	}
	p := faulty(tt, Config{})
	if _, err := p.DecideSerial(context.Background(), mode(95)); err != nil {
		tt.Fatal(err)
	}
	inst := idle(p)[0]
	if out := inst.out.String(); !strings.Contains(out, "hello on stdout") || !strings.Contains(out, "hello on stderr") {
		tt.Fatalf("captured %q", out)
	}
}

// TestRuntime_closeDuringLoad: closing a runtime while Loads are still
// validating and compiling (a host shutting down during a hot swap) waits
// for them to stop instead of closing wazero under them (it crashed with
// "assignment to entry in nil map" in a wazero store); Loads after Close
// fail cleanly.
func TestRuntime_closeDuringLoad(tt *testing.T) {
	wasm := readFile(tt, "testdata/faulty/faulty.wasm")
	for i := range 5 {
		rt, err := NewRuntime(context.Background(), Config{CacheDir: "-"})
		if err != nil {
			tt.Fatal(err)
		}
		done := make(chan error, 2)
		for j := range 2 {
			go func() {
				p, err := rt.Load(context.Background(), fmt.Sprintf("p%d-%d", i, j), wasm)
				if p != nil {
					_ = p.Close(context.Background())
				}
				done <- err
			}()
		}
		time.Sleep(time.Duration(i) * 5 * time.Millisecond)
		if err := rt.Close(context.Background()); err != nil {
			tt.Fatal(err)
		}
		for range 2 {
			<-done // an error or a policy: either, but no crash
		}
		if _, err := rt.Load(context.Background(), "after", wasm); err == nil {
			tt.Fatal("Load after Close: no error")
		}
	}
}

// TestRing_Reset: Reset empties the ring (head, tail and the lost mark)
// when something was written since the last one, and is a no-op otherwise;
// each call's output then starts empty (a call's error never quotes an
// earlier call's output).
func TestRing_Reset(tt *testing.T) {
	r := &ring{max: 8}
	r.Reset() // nothing written: stays empty
	if got := r.String(); got != "" {
		tt.Fatalf("fresh ring = %q", got)
	}
	r.Write([]byte("0123456789abc")) // overflows: lost set
	r.Reset()
	if got := r.String(); got != "" {
		tt.Fatalf("after Reset = %q", got)
	}
	r.Reset()
	r.Write([]byte("new"))
	if got := r.String(); got != "new" {
		tt.Fatalf("after Reset and a write = %q, want only the new bytes", got)
	}
	r.Reset()
	if got := r.String(); got != "" {
		tt.Fatalf("second Reset = %q", got)
	}
}

// TestPolicy_DecideSerial_wake: a version 4 decision may carry one wake
// (any time: the host's apply holds it to its bounds; 0 and times before
// the epoch are in the past, so the earliest); a second wake is
// undecodable, and a wake from a version 3 plugin is refused.
func TestPolicy_DecideSerial_wake(tt *testing.T) {
	rt := newRT(tt, Config{})
	v4 := load(tt, rt, "echo-v4", readFile(tt, "testdata/echo-v4.wasm"))
	v3 := load(tt, rt, "echo-v3", readFile(tt, "testdata/echo-v3.wasm"))
	if v4.ABIVersion() != 4 {
		tt.Fatalf("ABIVersion %d, want 4", v4.ABIVersion())
	}
	snap := func(rec []byte) *abi.SerialSnapshot {
		s := t.Snapshot(string(rec), 1, nil, []abi.Run{t.Waiting("w1", 1)})
		s.Waiting[0].Labels = []abi.Label{{Key: "ref", Value: "main"}}
		s.Params = []abi.Label{{Key: "period", Value: "2s"}}
		return s
	}
	wake := func(at uint64, n int) []byte {
		var d abi.SerialDecision
		d.Launch("w1", "go")
		d.Wake = 5
		rec := abicodec.AppendSerialDecision(nil, &d)
		// the wake is action 1: rewrite its time, repeat it n times
		at0 := abicodec.SerialDecisionHeaderSize + abicodec.ActionSize // action 1
		binary.LittleEndian.PutUint64(rec[at0+4:], at)
		for range n - 1 {
			extra := append([]byte(nil), rec[at0:at0+abicodec.ActionSize]...)
			rec = append(rec[:at0+abicodec.ActionSize], append(extra, rec[at0+abicodec.ActionSize:]...)...)
			binary.LittleEndian.PutUint32(rec[4:], binary.LittleEndian.Uint32(rec[4:])+1)
		}
		return rec
	}
	for _, c := range []struct {
		name string
		p    *Policy
		rec  []byte
		want int64  // the decision's wake
		err  string // or the error it must contain
	}{
		{"at", v4, wake(1_800_000_000_000, 1), 1_800_000_000_000, ""},
		{"zero-is-past", v4, wake(0, 1), 1, ""},
		{"2^63-is-past", v4, wake(1<<63, 1), 1, ""},
		{"max", v4, wake(1<<63-1, 1), 1<<63 - 1, ""},
		{"twice", v4, wake(7, 2), 0, "a second wake"},
		{"from-v3", v3, wake(7, 1), 0, "a wake: needs ABI version 4 (the policy exports version 3)"},
	} {
		tt.Run(c.name, func(tt *testing.T) {
			d, err := c.p.DecideSerial(context.Background(), snap(c.rec))
			if c.err == "" {
				if err != nil || d.Wake != c.want || len(d.Actions) != 1 {
					tt.Fatalf("got %+v, %v; want wake %d", d, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), c.err) {
				tt.Fatalf("err = %v, want ErrInvalidDecision with %q", err, c.err)
			}
		})
	}
}
