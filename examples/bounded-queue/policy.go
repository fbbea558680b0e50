package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy bounds a group's queue: it launches the oldest waiting runs below
// max_active (as wait does) and keeps at most `max_waiting` (default 1)
// of the others, the newest; the older ones are discarded. max_waiting is
// at most the group's window (group set --window, default 16): a deeper
// queue is cut to the window's newest part.
type policy struct{}

const (
	reasonLaunch  = "bounded-queue: oldest waiting run, below max_active"
	reasonDiscard = "bounded-queue: the queue keeps only its newest runs"
)

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	keep := max(sdk.ParamInt(s, "max_waiting", 1), 0)
	n := len(s.Waiting)
	launch := min(sdk.Free(s), n)
	for i := 0; i < launch; i++ {
		d.Launch(s.Waiting[i].ID, reasonLaunch)
	}
	total := n
	if s.Truncated() {
		total = int(s.WaitingTotal)
		keep = min(keep, n-int(s.WaitingOldest)) // the window's newest part
	}
	if total-launch <= keep {
		return
	}
	// keep the newest `keep` runs: discard every waiting run below the
	// first kept one that this decision does not launch (the launches are
	// in the oldest part, which holds at least max_active runs)
	if first := n - keep; first < n {
		d.DiscardBelow(s.Waiting[first].Seq, reasonDiscard)
	} else {
		d.DiscardBelow(s.Waiting[n-1].Seq+1, reasonDiscard)
	}
}
