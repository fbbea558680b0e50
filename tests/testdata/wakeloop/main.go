// Command wakeloop is a hostile ABI v4 policy for the wake bounds test:
// it launches nothing and asks to be woken 1 ms later on every call.
package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

type policy struct{}

func (policy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) { d.WakeAt(s.Now + 1) }

func init() { sdk.Register(policy{}) }

func main() {}
