package main

import "github.com/wasmsched/wasmsched/abi"

// policy is DolphinScheduler's WAIT generalised by max_active: while fewer than
// max_active runs are active (STOPPING ones included), launch the oldest
// WAITING runs, as many as fit in one decision. It never discards or stops.
type policy struct{}

// reasonLaunch is the reason of every wait launch (the WAT wait plugin uses
// the same bytes).
const reasonLaunch = "oldest waiting run, below max_active"

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	free := int(s.EffectiveMaxActive()) - len(s.Active)
	for i := 0; i < free && i < len(s.Waiting); i++ {
		d.Launch(s.Waiting[i].ID, reasonLaunch)
	}
}

// ABIVersion: the policy reads nothing of ABI version 4, so it takes the
// smaller version 3 snapshot (sdk.Versioned).
func (policy) ABIVersion() uint32 { return 3 }
