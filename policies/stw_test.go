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
// stopped. Asserted as a hang, not a latency: the GC started while the
// guest runs must end well before the call, which ends at the 1.2 s
// deadline (a guest holding the world lets it end only once the deadline
// stopped the guest; a GC normally takes milliseconds, 730 ms on a loaded
// machine under -race).
func TestDeadlineDuringStopTheWorld(tt *testing.T) {
	for _, m := range terminationModes {
		tt.Run(m, func(tt *testing.T) {
			rt := newRT(tt, Config{CallTimeout: 1200 * time.Millisecond, Termination: m})
			for _, name := range []string{"loop", "calls"} {
				if name == "calls" && m == TerminationWazero {
					continue // see TestInfiniteLoopStoppedByDeadline
				}
				pl := load(tt, rt, name, readFile(tt, "testdata/"+name+".wasm"))
				gcDone := make(chan time.Time, 1)
				go func() {
					time.Sleep(50 * time.Millisecond) // guest is running by now
					runtime.GC()
					gcDone <- time.Now()
				}()
				start := time.Now()
				if _, err := pl.DecideSerial(context.Background(), mode(1)); !errors.Is(err, ErrTimeout) {
					tt.Fatalf("%s.wat: err = %v, want ErrTimeout", name, err)
				}
				callEnd := time.Now()
				// a guest holding the world lets the GC end only when the
				// deadline stops it, as the call ends: a GC that ends well
				// before the call did not wait for it (measured against the
				// call, not a fixed time: a loaded machine under -race took
				// 730 ms for the GC alone)
				if gcEnd := <-gcDone; callEnd.Sub(gcEnd) < 300*time.Millisecond {
					tt.Errorf("%s.wat: runtime.GC ended %v after the call started (the call %v): it waited for the deadline, the guest held up stop-the-world",
						name, gcEnd.Sub(start), callEnd.Sub(start))
				}
			}
		})
	}
}
