package host_test

import (
	"math"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host"
)

func TestBoundedWake(t *testing.T) {
	const now = int64(1_800_000_000_000)
	for _, c := range []struct {
		name       string
		wake, want int64
	}{
		{"none", 0, 0},
		{"within", now + 5_000, now + 5_000},
		{"past", now - 5_000, now + abi.MinWakeInterval},
		{"negative", -1, now + abi.MinWakeInterval},
		{"too-soon", now + 1, now + abi.MinWakeInterval},
		{"far", now + 2*abi.MaxWakeAhead, now + abi.MaxWakeAhead},
		{"max", math.MaxInt64, now + abi.MaxWakeAhead},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := host.BoundedWake(c.wake, now); got != c.want {
				t.Fatalf("BoundedWake(%d, %d) = %d, want %d", c.wake, now, got, c.want)
			}
		})
	}
}
