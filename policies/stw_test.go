package policies

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestDeadlineDuringStopTheWorld: a runaway guest must still be stopped
// when the Go runtime stops the world (GC, ReadMemStats) while it runs:
// compiled guest code is not preemptible, so an inline check that never
// returns to Go would make the stop-the-world wait for the guest, and the
// deadline timer that should stop the guest cannot run while the world is
// stopped.
func TestDeadlineDuringStopTheWorld(tt *testing.T) {
	for _, m := range terminationModes {
		tt.Run(m, func(tt *testing.T) {
			rt := newRT(tt, Config{CallTimeout: 300 * time.Millisecond, Termination: m})
			for _, name := range []string{"loop", "calls"} {
				if name == "calls" && m == TerminationWazero {
					continue // see TestInfiniteLoopStoppedByDeadline
				}
				pl := load(tt, rt, name, readFile(tt, "testdata/"+name+".wasm"))
				gcDone := make(chan time.Duration, 1)
				go func() {
					time.Sleep(50 * time.Millisecond) // guest is running by now
					start := time.Now()
					runtime.GC()
					gcDone <- time.Since(start)
				}()
				if _, err := pl.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrTimeout) {
					tt.Fatalf("%s.wat: err = %v, want ErrTimeout", name, err)
				}
				if d := <-gcDone; d > 250*time.Millisecond {
					tt.Errorf("%s.wat: runtime.GC took %v: the guest held up stop-the-world", name, d)
				}
			}
		})
	}
}
