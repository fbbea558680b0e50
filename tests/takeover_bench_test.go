package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
)

// BenchmarkTakeover measures how long a standby `serve` takes to lead after
// the leader is killed (kill -9: the lease must run out) or stopped
// (SIGTERM: the lock is released). Each iteration starts a fresh leader and
// standby; the clock runs from the signal to the moment the fence in Redis
// names the standby (polled every 1ms). Reports the median and max.
//
//	go test ./tests -run '^$' -bench Takeover -benchtime 10x
func BenchmarkTakeover(b *testing.B) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		ttl  time.Duration
	}{
		{"kill9/ttl=1s", syscall.SIGKILL, time.Second},
		{"sigterm/ttl=2s", syscall.SIGTERM, 2 * time.Second},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := redistest.Start(b)
			st := Store(b, r, "bench")
			var took []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				a := Serve(b, fmt.Sprintf("a%d", i), r, "bench", "127.0.0.1:7401", tc.ttl)
				ida := a.Identity(b)
				a.WaitLog(b, 10*time.Second, "became leader")
				s := Serve(b, fmt.Sprintf("s%d", i), r, "bench", "127.0.0.1:7402", tc.ttl)
				ids := s.Identity(b)
				s.WaitLog(b, 10*time.Second, "standing by", "leader="+ida)
				// Steady state, and a random phase relative to the leader's
				// refresh (every TTL/3), so kill -9 lands anywhere in it.
				time.Sleep(tc.ttl/2 + rand.N(tc.ttl/3))
				b.StartTimer()

				start := time.Now()
				a.Signal(tc.sig)
				ctx, cancel := context.WithTimeout(context.Background(), 3*tc.ttl)
				for {
					li, err := st.Leader(ctx)
					if err == nil && li.Identity == ids {
						break
					}
					if ctx.Err() != nil {
						cancel()
						b.Fatalf("iteration %d: no takeover within %v", i, 3*tc.ttl)
					}
					time.Sleep(time.Millisecond)
				}
				cancel()
				took = append(took, time.Since(start))

				b.StopTimer()
				a.Kill()
				s.Signal(syscall.SIGTERM)
				s.Wait(b, 10*time.Second)
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(took)
			med := took[len(took)/2]
			if len(took)%2 == 0 {
				med = (took[len(took)/2-1] + took[len(took)/2]) / 2
			}
			b.ReportMetric(float64(med)/float64(time.Millisecond), "median-ms")
			b.ReportMetric(float64(took[len(took)-1])/float64(time.Millisecond), "max-ms")
			b.ReportMetric(float64(took[0])/float64(time.Millisecond), "min-ms")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d runs, takeover min %v median %v max %v", tc.name, len(took), took[0], med, took[len(took)-1])
		})
	}
}
