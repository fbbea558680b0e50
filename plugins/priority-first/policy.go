package main

import (
	"cmp"
	"slices"

	"github.com/wasmsched/wasmsched/abi"
)

// policy gives slots to the highest run priority first, the oldest (lowest
// seq) among equals.
type policy struct{}

func (policy) DecideAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision) {
	for i := range s.Runs {
		d.Order = append(d.Order, uint32(i))
	}
	slices.SortFunc(d.Order, func(a, b uint32) int {
		ra, rb := &s.Runs[a], &s.Runs[b]
		if c := cmp.Compare(rb.Priority, ra.Priority); c != 0 {
			return c
		}
		return cmp.Compare(ra.Seq, rb.Seq)
	})
}
