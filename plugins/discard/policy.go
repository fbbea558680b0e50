package main

import "github.com/wasmsched/wasmsched/abi"

// Discard is DolphinScheduler's DISCARD generalised by max_active: launch the
// oldest WAITING runs while fewer than max_active runs are active (with the
// default max_active 1: only when none is), and discard every other WAITING
// run. Active runs are never touched.
type Discard struct{}

func (Discard) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	free := int(s.EffectiveMaxActive()) - len(s.Active)
	for i := range s.Waiting {
		if i < free {
			d.Launch(s.Waiting[i].ID, "oldest waiting run, below max_active")
		} else {
			d.Discard(s.Waiting[i].ID, "group busy: discard policy drops later runs")
		}
	}
}
