package main

import "github.com/wasmsched/wasmsched/abi"

// Priority is DolphinScheduler's PRIORITY generalised by max_active: the
// newest max_active runs (by seq, among WAITING runs and active runs that are
// not already STOPPING) survive. Surviving WAITING runs are launched, older
// WAITING runs discarded and older active runs stopped; old and new overlap
// briefly while the old ones stop. STOPPING runs are left alone.
type Priority struct{}

func (Priority) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
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
	for i := range s.Waiting {
		if s.Waiting[i].Seq >= cutoff {
			d.Launch(s.Waiting[i].ID, "newest run wins")
		} else {
			d.Discard(s.Waiting[i].ID, "superseded by a newer run")
		}
	}
	for i := range s.Active {
		if s.Active[i].State != abi.StateStopping && s.Active[i].Seq < cutoff {
			d.Stop(s.Active[i].ID, "superseded by a newer run")
		}
	}
}
