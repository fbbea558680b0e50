package policies_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example-cache-")
	defer os.RemoveAll(dir)
	rt, err := policies.NewRuntime(ctx, policies.Config{CacheDir: dir})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	wasm, _ := plugins.Builtin("priority")
	p, err := rt.Load(ctx, "priority", wasm)
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	d, err := p.DecideSerial(ctx, &abi.SerialSnapshot{
		Group: "nightly", Policy: "priority", MaxActive: 1,
		Active:  []abi.Run{{ID: "r1", Seq: 1, State: abi.StateRunning}},
		Waiting: []abi.Run{{ID: "r2", Seq: 2, State: abi.StateWaiting}, {ID: "r3", Seq: 3, State: abi.StateWaiting}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Kind())
	for _, a := range d.Actions {
		fmt.Println(a.Kind, a.Run, "-", a.Reason)
	}
	// Output:
	// serial
	// discard r2 - superseded by a newer run
	// launch r3 - newest run wins
	// stop r1 - superseded by a newer run
}

func ExampleValidateSerial() {
	s := &abi.SerialSnapshot{MaxActive: 1, Waiting: []abi.Run{{ID: "w", Seq: 1, State: abi.StateWaiting}}}
	d := &abi.SerialDecision{Actions: []abi.Action{{Kind: abi.ActionStop, Run: "w"}, {Kind: abi.ActionLaunch, Run: "x"}}}
	fmt.Println(policies.ValidateSerial(s, d))
	// Output:
	// invalid decision: action 0: stop "w": run is WAITING, not LAUNCHED or RUNNING; action 1: launch "x": unknown run (not in the snapshot)
}
