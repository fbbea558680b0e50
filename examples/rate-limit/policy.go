package main

import (
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy rate-limits a group: at most `limit` (default 1, at most 64)
// launches in any `period` (default 1s); a waiting run beyond the limit is
// discarded, not kept (a run that only waits for a place below max_active
// is kept). Counted from the recent launches the host hands it (ABI v4).
type policy struct{}

const (
	reasonLaunch  = "rate-limit: within the limit of the period"
	reasonDiscard = "rate-limit: over the limit of the period"
)

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	limit := min(max(sdk.ParamInt(s, "limit", 1), 1), abi.MaxLaunches)
	period := sdk.ParamDuration(s, "period", time.Second).Milliseconds()
	used, _ := sdk.LaunchesSince(s, s.Now-period+1)
	free := sdk.Free(s)
	for i := range s.Waiting {
		switch {
		case used >= limit:
			d.Discard(s.Waiting[i].ID, reasonDiscard)
		case free > 0:
			d.Launch(s.Waiting[i].ID, reasonLaunch)
			used, free = used+1, free-1
		}
	}
	if s.Truncated() && used >= limit {
		d.DiscardBelow(s.Waiting[len(s.Waiting)-1].Seq+1, reasonDiscard)
	}
}
