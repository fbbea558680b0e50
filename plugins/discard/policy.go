package main

import "github.com/wasmsched/wasmsched/abi"

// policy is DolphinScheduler's DISCARD generalised by max_active: launch the
// oldest WAITING runs while fewer than max_active runs are active (with the
// default max_active 1: only when none is), and discard every other WAITING
// run. Active runs are never touched. When the snapshot's window does not
// hold every waiting run, one discard_below covers the rest, however many.
type policy struct{}

const (
	reasonLaunch  = "oldest waiting run, below max_active"
	reasonDiscard = "group busy: discard policy drops later runs"
)

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	free := int(s.EffectiveMaxActive()) - len(s.Active)
	if s.Truncated() {
		// the window's oldest part holds at least max_active runs
		for i := 0; i < free && i < len(s.Waiting); i++ {
			d.Launch(s.Waiting[i].ID, reasonLaunch)
		}
		d.DiscardBelow(s.Waiting[len(s.Waiting)-1].Seq+1, reasonDiscard)
		return
	}
	for i := range s.Waiting {
		if i < free {
			d.Launch(s.Waiting[i].ID, reasonLaunch)
		} else {
			d.Discard(s.Waiting[i].ID, reasonDiscard)
		}
	}
}

// ABIVersion: the policy reads nothing of ABI version 4, so it takes the
// smaller version 3 snapshot (sdk.Versioned).
func (policy) ABIVersion() uint32 { return 3 }
