package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy is GitHub Actions' concurrency group with cancel-in-progress,
// keyed by a label (param `key`, default "ref"): the newest waiting run of
// each value launches, stopping the older active run of the same value
// and discarding the older waiting ones; runs of other values run beside
// it up to max_active. A run without the label has the value "".
type policy struct{}

const (
	reasonLaunch  = "cancel-in-progress: newest run of its key"
	reasonStop    = "cancel-in-progress: a newer run of the same key"
	reasonDiscard = "cancel-in-progress: superseded by a newer run of the same key"
)

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	key := sdk.ParamString(s, "key", "ref")
	free := sdk.Free(s)
	// newest first: the first waiting run seen of a value is its newest
	for i := len(s.Waiting) - 1; i >= 0; i-- {
		w := &s.Waiting[i]
		v := w.Label(key)
		if newerWaiting(s.Waiting[i+1:], key, v) {
			d.Discard(w.ID, reasonDiscard)
			continue
		}
		for j := range s.Active {
			a := &s.Active[j]
			if a.State != abi.StateStopping && a.Label(key) == v && a.Seq < w.Seq {
				d.Stop(a.ID, reasonStop) // its place is this run's
				free++
			}
		}
		if free > 0 {
			d.Launch(w.ID, reasonLaunch)
			free--
		}
	}
}

// newerWaiting reports whether a run in newer has value v of key.
func newerWaiting(newer []abi.Run, key, v string) bool {
	for i := range newer {
		if newer[i].Label(key) == v {
			return true
		}
	}
	return false
}
