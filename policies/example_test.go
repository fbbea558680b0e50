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

// A caller deciding many groups in a row (the coordinator) reuses one
// decision: DecideSerialInto writes into it, reusing its array. This runs
// the C example of the priority policy, whose decisions name runs by their
// index in the snapshot (ABI v3); the host turns them back into run ids.
func ExamplePolicy_DecideSerialInto() {
	ctx := context.Background()
	rt, err := policies.NewRuntime(ctx, policies.Config{CacheDir: "-"})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	wasm, err := os.ReadFile("../plugins/c/priority/priority.wasm")
	if err != nil {
		panic(err)
	}
	p, err := rt.Load(ctx, "priority-c", wasm)
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	var d abi.SerialDecision // reused for every group
	for _, waiting := range [][]string{{"a1", "a2"}, {"b1"}} {
		s := &abi.SerialSnapshot{Group: "g", Policy: "priority", MaxActive: 1}
		for i, id := range waiting {
			s.Waiting = append(s.Waiting, abi.Run{ID: id, Seq: uint64(i + 1), State: abi.StateWaiting})
		}
		if err := p.DecideSerialInto(ctx, s, &d); err != nil {
			panic(err)
		}
		fmt.Println(p.ABIVersion(), d.Actions)
	}
	// Output:
	// 6 [{discard a1 superseded by a newer run} {launch a2 newest run wins}]
	// 6 [{launch b1 newest run wins}]
}
