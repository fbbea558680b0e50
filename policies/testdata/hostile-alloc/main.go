// Command hostile-alloc is a deliberately misbehaving allocation policy
// for the sandbox and hot-swap tests. Its behaviour is chosen by the
// namespace's allocation parameter "mode" (namespace set --param mode=X):
//
//	loop:    an infinite loop (the call deadline kills it)
//	trap:    a panic
//	bomb:    allocates memory until the cap
//	unknown: an order naming a run index beyond the snapshot
//	twice:   the first run twice
//	long:    an order longer than the snapshot (claimed in the header)
//	empty:   an empty order on every pass (valid, places nothing)
//	small-first: (valid) the runs needing the fewest slots first, the
//	         biggest last (a big run never reaches the slots that free)
//	reverse: (well behaved) the newest run first
//	place-unknown:  every run on a worker index beyond the snapshot
//	place-mismatch: every run on a worker that does not take it (lacks
//	         a required label or does not serve its group), if any
//	place-full: every run on the first worker, whatever its free slots
//	place-twice: the first run twice, on the first worker
//	place-first: (valid) every run on the first worker that takes it and
//	         has its slots free
//
// any other value (or none) orders like fifo.
//
// Build (from the repository root; policies/testdata/build.sh):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o policies/testdata/hostile-alloc/hostile-alloc.wasm ./policies/testdata/hostile-alloc
package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

type hostile struct{}

var (
	spin uint64
	sink [][]byte
)

func (hostile) DecideAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision) {
	mode, _ := s.Param("mode")
	switch mode {
	case "loop":
		for {
			spin++
		}
	case "trap":
		panic("hostile-alloc: deliberate panic")
	case "bomb":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "unknown":
		d.Order = append(d.Order, uint32(len(s.Runs)+7))
		return
	case "twice":
		if len(s.Runs) > 0 {
			d.Order = append(d.Order, 0, 0)
		}
		return
	case "long":
		for i := 0; i <= len(s.Runs)+1; i++ {
			d.Order = append(d.Order, uint32(i%max(len(s.Runs), 1)))
		}
		return
	case "empty":
		return
	case "small-first":
		for k := uint32(1); k <= 64; k++ { // (slots 0 reads as 1)
			for i, r := range s.Runs {
				if max(r.Slots, 1) == k {
					d.Order = append(d.Order, uint32(i))
				}
			}
		}
		return
	case "place-unknown":
		for i := range s.Runs {
			d.Place(uint32(i), int32(len(s.Workers)+3))
		}
		return
	case "place-mismatch":
		for i := range s.Runs {
			for w := range s.Workers {
				if !s.Workers[w].Takes(&s.Runs[i]) {
					d.Place(uint32(i), int32(w))
					break
				}
			}
		}
		return
	case "place-full":
		for i := range s.Runs {
			d.Place(uint32(i), 0)
		}
		return
	case "place-twice":
		if len(s.Runs) > 0 && len(s.Workers) > 0 {
			d.Place(0, 0)
			d.Place(0, 0)
		}
		return
	case "place-first":
		free := make([]uint32, len(s.Workers))
		for w := range s.Workers {
			free[w] = s.Workers[w].Free
		}
		for i := range s.Runs {
			w := abi.HostChooses
			for j := range s.Workers {
				if free[j] >= max(s.Runs[i].Slots, 1) && s.Workers[j].Takes(&s.Runs[i]) {
					w = int32(j)
					free[j] -= max(s.Runs[i].Slots, 1)
					break
				}
			}
			d.Place(uint32(i), w)
		}
		return
	case "reverse":
		for i := len(s.Runs) - 1; i >= 0; i-- {
			d.Order = append(d.Order, uint32(i))
		}
		return
	}
	for i := range s.Runs {
		d.Order = append(d.Order, uint32(i))
	}
}

func init() { sdk.Register(hostile{}) }

func main() {}
