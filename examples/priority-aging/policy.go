package main

import (
	"sort"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy launches the highest-priority waiting runs first, below
// max_active, with aging: a run's priority rises by one for each
// `age_step` (default 1m) it has waited, so a low-priority run is not
// starved by a stream of high-priority ones. Ties go to the oldest. It
// never discards or stops.
type policy struct{}

const reasonLaunch = "priority-aging: highest priority after aging"

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	free := min(sdk.Free(s), len(s.Waiting))
	if free == 0 {
		return
	}
	step := sdk.ParamDuration(s, "age_step", time.Minute).Milliseconds()
	if step <= 0 {
		step = 1
	}
	idx := make([]int, len(s.Waiting))
	eff := make([]int64, len(s.Waiting))
	for i := range s.Waiting {
		w := &s.Waiting[i]
		idx[i] = i
		eff[i] = int64(w.Priority) + max(s.Now-w.SubmittedAt, 0)/step
	}
	sort.SliceStable(idx, func(a, b int) bool { return eff[idx[a]] > eff[idx[b]] })
	for _, i := range idx[:free] {
		d.Launch(s.Waiting[i].ID, reasonLaunch)
	}
}
