package policies

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/plugins"
)

func builtin(tb testing.TB, rt *Runtime, name string) *Policy {
	wasm, ok := plugins.Builtin(name)
	if !ok {
		tb.Fatalf("no builtin %q", name)
	}
	return load(tb, rt, name, wasm)
}

func TestConcurrentCallsShareThePool(tt *testing.T) {
	p := builtin(tt, newRT(tt, Config{PoolSize: 2}), "wait")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				id := fmt.Sprintf("g%d-%d", g, i)
				s := t.Snapshot("wait", 1, nil, []abi.Run{t.Waiting(id, 1), t.Waiting("other", 2)})
				d, err := p.DecideSerial(context.Background(), s)
				if err != nil || len(d.Actions) != 1 || d.Actions[0].Run != id {
					errs <- fmt.Errorf("%s: %+v %v", id, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tt.Error(err)
	}
	if n := len(idle(p)); n > 2 {
		tt.Fatalf("%d instances pooled, PoolSize 2", n)
	}
}

func TestCloseWaitsForCallsInFlight(tt *testing.T) {
	p := faulty(tt, Config{CallTimeout: 300 * time.Millisecond, PoolSize: 1})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		close(started)
		_, err := p.DecideSerial(context.Background(), mode(99)) // runs until its deadline
		done <- err
	}()
	<-started
	for len(p.sem) == 0 { // wait until the call holds its pool token
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := p.Close(context.Background()); err != nil {
		tt.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		tt.Fatalf("Close returned after %v, before the call in flight hit its 300ms deadline", el)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			tt.Fatalf("in-flight call: %v", err)
		}
	case <-time.After(10 * time.Second):
		tt.Fatal("in-flight call never returned")
	}
	if _, err := p.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrClosed) {
		tt.Fatalf("after Close: %v", err)
	}
}

func TestKindMismatch(tt *testing.T) {
	skipUnderRace(tt)
	rt := newRT(tt, Config{})
	p := builtin(tt, rt, "wait")
	if p.Kind() != abi.KindSerial || len(p.Version()) != 64 || p.name != "wait" {
		tt.Fatalf("%s %s %s", p.name, p.Kind(), p.Version())
	}
	if _, err := p.DecideReuse(context.Background(), t.Reuse()); !errors.Is(err, ErrKind) {
		tt.Fatal(err)
	}
	r := builtin(tt, rt, "reuse")
	if _, err := r.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrKind) {
		tt.Fatal(err)
	}
	bad := t.Snapshot("wait", 1, nil, []abi.Run{t.Running("x", 1)})
	if _, err := p.DecideSerial(context.Background(), bad); !errors.Is(err, ErrInvalidSnapshot) {
		tt.Fatal(err)
	}
}

// Hot swap: loading and closing versions repeatedly must not leak instances.
func TestLoadCloseCycles(tt *testing.T) {
	rt := newRT(tt, Config{})
	wasm, _ := plugins.Builtin("wait")
	for range 5 {
		p, err := rt.Load(context.Background(), "wait", wasm)
		if err != nil {
			tt.Fatal(err)
		}
		mustWorkWait(tt, p)
		if err := p.Close(context.Background()); err != nil {
			tt.Fatal(err)
		}
		if len(idle(p)) != 0 {
			tt.Fatal("instances left after Close")
		}
	}
}

func mustWorkWait(tb testing.TB, p *Policy) {
	d, err := p.DecideSerial(context.Background(), mode(1))
	if err != nil || len(d.Actions) != 0 {
		tb.Fatalf("%+v %v", d, err)
	}
}

// Concurrent Loads of the same bytes on a fresh runtime whose file cache
// holds the module: wazero 1.12 publishes a module read from the file
// cache to its in-memory cache before it has built the module's entry
// preambles, so an unserialised concurrent compile got a half-built module
// and panicked in ExportedFunction (seen in a multi-namespace host, where
// every namespace loads the built-ins at once). Runtime.Load serialises
// compiles per module.
func TestRuntime_Load_concurrentSameModule(tt *testing.T) {
	wasm, _ := plugins.Builtin("priority")
	builtin(tt, newRT(tt, Config{}), "priority") // the file cache has it now

	// The half-built module showed within a few rounds.
	rounds := 5
	if raceEnabled {
		rounds = 2 // the detector sees an unsynchronised access in the first
	}
	for round := range rounds {
		rt := newRT(tt, Config{})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				p, err := rt.Load(context.Background(), "priority", wasm)
				if err != nil {
					errs <- err
					return
				}
				s := t.Snapshot("priority", 1, nil, []abi.Run{t.Waiting("a", 1), t.Waiting("b", 2)})
				if _, err := p.DecideSerial(context.Background(), s); err != nil {
					errs <- err
				}
				_ = p.Close(context.Background())
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			tt.Errorf("round %d: %v", round, err)
		}
	}
}

// TestInstance_call_deadlineRearms: the call deadline's timer stays set
// across calls (deadline.tick); a call's deadline still stops it when an
// earlier call set the timer for a later time (a long _initialize before
// a short decide) or an earlier one (many short calls, then one that runs
// on). Each stuck call waits for its context's Done, which only the
// deadline closes; the 2 s guard only catches a timer that never fires.
func TestInstance_call_deadlineRearms(tt *testing.T) {
	stuck := func(c context.Context) error { <-c.Done(); return nil }
	run := func(inst *instance, timeout time.Duration, f func(context.Context) error) bool {
		tt.Helper()
		done := make(chan bool, 1)
		go func() {
			usable, _ := inst.call(context.Background(), timeout, f)
			done <- usable
		}()
		select {
		case usable := <-done:
			return usable
		case <-time.After(2 * time.Second):
			tt.Fatalf("a call with a %v deadline still running after 2s", timeout)
			return false
		}
	}
	for _, c := range []struct {
		name   string
		before []time.Duration // calls that return at once
	}{
		{"after-a-longer-call", []time.Duration{time.Hour}},
		{"after-short-calls", []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}},
		{"first-call", nil},
	} {
		tt.Run(c.name, func(tt *testing.T) {
			inst := &instance{}
			inst.dl.init(false)
			defer inst.dl.timer.Stop()
			for _, d := range c.before {
				if !run(inst, d, func(context.Context) error { return nil }) {
					tt.Fatalf("a call that returned at once is not usable")
				}
			}
			time.Sleep(30 * time.Millisecond) // the short calls' timer fires while idle
			if run(inst, 50*time.Millisecond, stuck) {
				tt.Fatal("a call stopped by its deadline reported the instance usable")
			}
			if !inst.dl.fired.Load() || inst.dl.Err() == nil {
				tt.Fatal("the deadline did not fire")
			}
		})
	}
}
