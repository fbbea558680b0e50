package main

import "github.com/wasmsched/wasmsched/abi"

// OldestFirstByPriority launches, while the group has fewer than max_active
// active runs (STOPPING ones count), the WAITING run with the highest
// priority; among equal priorities the oldest (lowest seq) goes first.
type OldestFirstByPriority struct{}

// ReasonLaunch is the reason of every launch.
const ReasonLaunch = "highest priority, oldest first"

// picked marks the waiting runs chosen in this call. A global reused across
// calls keeps the hot path free of allocation.
var picked []bool

func (OldestFirstByPriority) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	free := int(s.EffectiveMaxActive()) - len(s.Active)
	if free <= 0 || len(s.Waiting) == 0 {
		return
	}
	if cap(picked) < len(s.Waiting) {
		picked = make([]bool, len(s.Waiting))
	}
	picked = picked[:len(s.Waiting)]
	clear(picked)
	for ; free > 0; free-- {
		best := -1
		for i := range s.Waiting {
			// Waiting is sorted by seq, so the first of equal priority is the oldest.
			if !picked[i] && (best < 0 || s.Waiting[i].Priority > s.Waiting[best].Priority) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		picked[best] = true
		d.Launch(s.Waiting[best].ID, ReasonLaunch)
	}
}
