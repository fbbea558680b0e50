package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy is Inngest's singleton keyed by a label (param `key`, default
// "key"): a waiting run whose value has an active run is discarded; the
// oldest waiting run of a value with none launches, below max_active
// (one of a value at a time), and the others of its value are discarded.
// A run without the label has the value "".
type policy struct{}

const (
	reasonLaunch  = "singleton: none of its key runs"
	reasonDiscard = "singleton: a run of the same key is active"
)

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	key := sdk.ParamString(s, "key", "key")
	free := sdk.Free(s)
	busy := make(map[string]bool, len(s.Active)+len(s.Waiting))
	for i := range s.Active {
		busy[s.Active[i].Label(key)] = true
	}
	for i := range s.Waiting {
		w := &s.Waiting[i]
		v := w.Label(key)
		switch {
		case busy[v]:
			d.Discard(w.ID, reasonDiscard)
		case free > 0:
			d.Launch(w.ID, reasonLaunch)
			busy[v] = true
			free--
		}
	}
}
