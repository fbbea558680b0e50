package main

import (
	"slices"

	"github.com/wasmsched/wasmsched/abi"
)

// policy is DolphinScheduler's PRIORITY generalised by max_active: the
// newest max_active runs (by seq, among WAITING runs and active runs that are
// not already STOPPING) survive. Surviving WAITING runs are launched, older
// WAITING runs discarded and older active runs stopped; old and new overlap
// briefly while the old ones stop. STOPPING runs are left alone.
type policy struct{}

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	keep := int(s.EffectiveMaxActive())
	// Walk both seq-sorted lists from the newest end to find the seq of the
	// keep-th newest candidate: everything at or above it survives.
	ia, iw := len(s.Active)-1, len(s.Waiting)-1
	var cutoff uint64
	for kept := 0; kept < keep; kept++ {
		for ia >= 0 && s.Active[ia].State == abi.StateStopping {
			ia--
		}
		switch {
		case iw >= 0 && (ia < 0 || s.Waiting[iw].Seq > s.Active[ia].Seq):
			cutoff = s.Waiting[iw].Seq
			iw--
		case ia >= 0:
			cutoff = s.Active[ia].Seq
			ia--
		default:
			cutoff = 0 // fewer candidates than max_active: all survive
			kept = keep
		}
	}
	if s.Truncated() {
		// Not every waiting run is in the window: its newest part holds at
		// least max_active runs, so the survivors are all in it, and one
		// discard_below covers every older run, in the window or not.
		for i := range s.Waiting {
			if s.Waiting[i].Seq >= cutoff {
				d.Launch(s.Waiting[i].ID, reasonNewest)
			}
		}
		if cutoff > 0 {
			d.DiscardBelow(cutoff, reasonSuperseded)
		}
		stopOlder(s, d, cutoff)
		return
	}
	// One append per waiting run, kind and reason chosen without a branch:
	// in the wasm guest each taken branch costs a deadline check.
	w := s.Waiting
	d.Actions = slices.Grow(d.Actions, len(w)+len(s.Active))
	for i := range w {
		kind, why := abi.ActionDiscard, reasonSuperseded
		if w[i].Seq >= cutoff {
			kind, why = abi.ActionLaunch, reasonNewest
		}
		d.Add(kind, w[i].ID, why)
	}
	stopOlder(s, d, cutoff)
}

// stopOlder stops the active runs (not already STOPPING) older than cutoff.
func stopOlder(s *abi.SerialSnapshot, d *abi.SerialDecision, cutoff uint64) {
	for i := range s.Active {
		if s.Active[i].State != abi.StateStopping && s.Active[i].Seq < cutoff {
			d.Stop(s.Active[i].ID, reasonSuperseded)
		}
	}
}

const (
	reasonNewest     = "newest run wins"
	reasonSuperseded = "superseded by a newer run"
)

// ABIVersion: the policy reads nothing of ABI version 4, so it takes the
// smaller version 3 snapshot (sdk.Versioned).
func (policy) ABIVersion() uint32 { return 3 }
