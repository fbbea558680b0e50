package main

import "github.com/wasmsched/wasmsched/abi"

// policy gives slots in launch order: the snapshot's runs as sent (seq
// ascending), oldest first. The host's backfill and slot guard do the rest.
type policy struct{}

func (policy) DecideAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision) {
	for i := range s.Runs {
		d.Order = append(d.Order, uint32(i))
	}
}
