package sdk_test

import (
	"fmt"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

// oldestFirst launches the oldest waiting run when nothing is active.
type oldestFirst struct{}

func (oldestFirst) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	if len(s.Active) == 0 && len(s.Waiting) > 0 {
		d.Launch(s.Waiting[0].ID, "idle group")
	}
}

func Example() {
	// In a plugin: func init() { sdk.Register(oldestFirst{}) }; here the
	// policy runs natively through the same encode/decode path.
	d, err := sdk.CallSerial(oldestFirst{}, &abi.SerialSnapshot{
		Group: "g", MaxActive: 1,
		Waiting: []abi.Run{{ID: "a", Seq: 1, State: abi.StateWaiting}, {ID: "b", Seq: 2, State: abi.StateWaiting}},
	})
	fmt.Println(d.Actions, err)
	// Output: [{launch a idle group}] <nil>
}
