package main

import (
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy throttles a group: at most `limit` (default 1, at most 64:
// abi.MaxLaunches) launches in any `period` (default 1s), oldest first,
// below max_active; the rest wait, and the policy asks to be woken when
// the oldest launch in the period leaves it. It counts the group's
// recent launches the host hands it (ABI v4), so it keeps no state.
type policy struct{}

const reasonLaunch = "throttle: a launch within the limit of the period"

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	if len(s.Waiting) == 0 {
		return
	}
	limit := min(max(sdk.ParamInt(s, "limit", 1), 1), abi.MaxLaunches)
	period := sdk.ParamDuration(s, "period", time.Second).Milliseconds()
	since := s.Now - period + 1 // launches in (now - period, now]
	used, _ := sdk.LaunchesSince(s, since)
	n := min(limit-used, sdk.Free(s), len(s.Waiting))
	for i := 0; i < n; i++ {
		d.Launch(s.Waiting[i].ID, reasonLaunch)
	}
	n = max(n, 0)
	if n < len(s.Waiting) && used+n >= limit {
		d.WakeAt(nextPlace(s, used, n, limit, period))
	}
}

// nextPlace is when one more launch fits the period: when launch j (0 =
// the oldest) of the period's launches, the used recent ones and then
// this decision's n, is a period old, j = used+n-limit.
func nextPlace(s *abi.SerialSnapshot, used, n, limit int, period int64) int64 {
	if j := used + n - limit; j < used {
		return s.Launches[len(s.Launches)-used+j].At + period
	}
	return s.Now + period // one of this decision's own launches
}
