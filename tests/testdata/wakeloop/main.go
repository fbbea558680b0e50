// Command wakeloop is an ABI v4 policy for the wake tests: it launches
// nothing and asks to be woken `period` ms later (default 1: a hostile
// policy, held to the minimum interval) on every call.
package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

type policy struct{}

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	d.WakeAt(s.Now + int64(sdk.ParamInt(s, "period", 1)))
}

func init() { sdk.Register(policy{}) }

func main() {}
