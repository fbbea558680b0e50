package main

import "github.com/wasmsched/wasmsched/abi"

// policy keeps every task slot the host verified (worker alive and slot still
// held with the run's token) and reallocates the rest. It never fails a run.
type policy struct{}

func (policy) DecideReuse(r *abi.ReuseRequest, d *abi.ReuseDecision) {
	for i := range r.Slots {
		if r.Slots[i].Alive && r.Slots[i].Held {
			d.Verdicts = append(d.Verdicts, abi.VerdictReuse)
		} else {
			d.Verdicts = append(d.Verdicts, abi.VerdictReallocate)
		}
	}
}
