package params_test

import (
	"fmt"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/params"
)

// A policy's declaration, and a group's parameters checked against it as
// the host does at group set.
func ExampleCheck() {
	decls := []params.Param{
		params.Int("limit", 1, 1, 64, "launches per period"),
		params.Duration("period", "1s", "1ms", "168h", "the window"),
	}
	fmt.Println(params.Check(decls, []abi.Label{{Key: "limit", Value: "10"}, {Key: "period", Value: "1m"}}))
	fmt.Println(params.Check(decls, []abi.Label{{Key: "period", Value: "2sec"}}))
	// Output:
	// <nil>
	// parameter period: "2sec" is not a duration (e.g. 2s, 1m30s, or a number of ms) (duration min 1ms, max 168h, default 1s): invalid parameter
}
