package main

import (
	"sort"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// policy launches across the values of a label in turn (param `key`,
// default "tenant"), below max_active: Hatchet's GROUP_ROUND_ROBIN inside
// one group. Each value's oldest waiting run is its next; the turn starts
// after the value of the group's latest launch (the recent launches the
// host hands it, ABI v4), values in sorted order, so a tenant that
// submits a thousand runs waits its turn behind one run of each other
// tenant. A run without the label has the value "".
type policy struct{}

const reasonLaunch = "round-robin: its key's turn"

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	free := sdk.Free(s)
	if free == 0 || len(s.Waiting) == 0 {
		return
	}
	key := sdk.ParamString(s, "key", "tenant")
	// each value's waiting runs, oldest first
	queues := map[string][]int{}
	var values []string
	for i := range s.Waiting {
		v := s.Waiting[i].Label(key)
		if _, ok := queues[v]; !ok {
			values = append(values, v)
		}
		queues[v] = append(queues[v], i)
	}
	sort.Strings(values)
	last := ""
	if n := len(s.Launches); n > 0 {
		last = abi.LabelValue(s.Launches[n-1].Labels, key)
	}
	// the first value after the last launched one, cyclically
	start := sort.SearchStrings(values, last)
	if start < len(values) && values[start] == last && len(s.Launches) > 0 {
		start++
	}
	for round := 0; free > 0; round++ {
		took := false
		for j := range values {
			q := queues[values[(start+j)%len(values)]]
			if round < len(q) && free > 0 {
				d.Launch(s.Waiting[q[round]].ID, reasonLaunch)
				free--
				took = true
			}
		}
		if !took {
			return
		}
	}
}
