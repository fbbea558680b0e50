package main

import (
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy debounces a group: the newest waiting run launches once no run
// was submitted for `period` (default 1s), the older waiting runs are
// discarded then; a steady stream still launches its newest run once the
// oldest waiting one has waited `max_wait` (default 0: no bound). While
// it waits it asks to be woken at the earlier of the two times (ABI v4),
// so nothing else needs to happen for the launch. A launch waits for a
// place below max_active.
type policy struct{}

const (
	reasonLaunch  = "debounce: newest run after the quiet period"
	reasonMaxWait = "debounce: newest run, the oldest waited max_wait"
	reasonDiscard = "debounce: superseded by a newer run"
)

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	if len(s.Waiting) == 0 {
		return
	}
	period := sdk.ParamDuration(s, "period", time.Second).Milliseconds()
	maxWait := sdk.ParamDuration(s, "max_wait", 0).Milliseconds()
	newest, oldest := &s.Waiting[len(s.Waiting)-1], &s.Waiting[0]
	quietAt := newest.SubmittedAt + period
	due, reason := quietAt, reasonLaunch
	if maxWait > 0 && oldest.SubmittedAt+maxWait < due {
		due, reason = oldest.SubmittedAt+maxWait, reasonMaxWait
	}
	if s.Now < due {
		d.WakeAt(due)
		return
	}
	if sdk.Free(s) == 0 {
		return // decided again when an active run ends
	}
	d.Launch(newest.ID, reason)
	if len(s.Waiting) > 1 {
		d.DiscardBelow(newest.Seq, reasonDiscard) // every older one, beyond the window too
	}
}
