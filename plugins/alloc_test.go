package plugins_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/plugins/internal/cases"
)

// The allocation built-ins through the host path (the committed wasm): the
// order each gives, as run ids.
func TestAllocationBuiltins(t *testing.T) {
	run := func(id, group string, seq uint64, slots uint32, prio int32, tenant string) abi.AllocRun {
		r := abi.AllocRun{ID: id, Group: group, Seq: seq, Slots: slots, Priority: prio}
		if tenant != "" {
			r.Labels = []abi.Label{{Key: "tenant", Value: tenant}}
		}
		return r
	}
	// tenant a holds 4 slots, b none; a's runs are older
	runs := []abi.AllocRun{
		run("a1", "ga", 1, 1, 0, "a"), run("a2", "ga", 2, 1, 5, "a"), run("a3", "ga", 3, 2, 0, "a"),
		run("b1", "gb", 4, 1, 0, "b"), run("b2", "gb", 5, 1, 9, "b"), run("n1", "gn", 6, 1, 0, ""),
	}
	usage := []abi.SlotUsage{{Value: "ga", Slots: 4, Runs: 4}, {Key: "tenant", Value: "a", Slots: 4, Runs: 4}}
	snap := func(params ...abi.Label) *abi.AllocationSnapshot {
		return &abi.AllocationSnapshot{Now: 1, Free: 2, Total: 6, LaunchedTotal: uint32(len(runs)), Oldest: uint32(len(runs)),
			Runs: runs, Usage: usage, Params: params}
	}
	label := abi.Label{Key: abi.ParamFairLabel, Value: "tenant"}
	for _, c := range []struct {
		policy string
		snap   *abi.AllocationSnapshot
		want   string
	}{
		{"fifo", snap(), "[a1 a2 a3 b1 b2 n1]"},
		{"priority-first", snap(), "[b2 a2 a1 a3 b1 n1]"},
		// b and "" use nothing, a uses 4: b1, n1 (ties: the older head), b2, then n/b/a fill
		{"fair", snap(label), "[b1 n1 b2 a1 a2 a3]"},
		// weight a=10: a1 would leave a at (4+1)/10 = 0.5, below b's and ""'s 1 after one run
		{"fair", snap(label, abi.Label{Key: abi.ParamWeights, Value: "a=10"}), "[a1 a2 a3 b1 n1 b2]"},
		// no fair_label: across groups (ga uses 4)
		{"fair", snap(), "[b1 n1 b2 a1 a2 a3]"},
		{"fifo", &abi.AllocationSnapshot{}, "[]"},
	} {
		t.Run(c.policy, func(t *testing.T) {
			b, ok := plugins.Builtin(c.policy)
			if !ok {
				t.Fatal("not a built-in")
			}
			if p, _ := plugins.Lookup(c.policy); p.Kind != abi.KindAllocation {
				t.Fatalf("kind %v", p.Kind)
			}
			p := cases.Load(t, c.policy, b)
			d, err := p.DecideAllocation(context.Background(), c.snap)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, i := range d.Order {
				ids = append(ids, c.snap.Runs[i].ID)
			}
			if got := fmt.Sprint(ids); got != c.want && !(c.want == "[]" && len(ids) == 0) {
				t.Fatalf("order %s, want %s", got, c.want)
			}
		})
	}
}
