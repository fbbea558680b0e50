package storage_test

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_SetAllocation(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		if a := ok(e.s.Allocation(ctx))(t); a.PolicyName() != "fifo" || a.Policy != "" {
			t.Fatalf("default %+v", a)
		}
		for name, a := range map[string]storage.AllocationSettings{
			"policy-brace":   {Policy: "fa{ir"},
			"label-upper":    {Policy: "fair", FairLabel: "Tenant"},
			"weight-zero":    {Policy: "fair", Weights: map[string]int{"a": 0}},
			"weight-big":     {Policy: "fair", Weights: map[string]int{"a": limits.MaxWeight + 1}},
			"weight-comma":   {Policy: "fair", Weights: map[string]int{"a,b": 1}},
			"reserved-param": {Policy: "x", Params: []abi.Label{{Key: abi.ParamWeights, Value: "a=1"}}},
			"param-key":      {Policy: "x", Params: []abi.Label{{Key: "Mode", Value: "1"}}},
		} {
			t.Run(name, func(t *testing.T) {
				e.unchanged(t, func() {
					if err := e.s.SetAllocation(ctx, a); !errors.Is(err, storage.ErrInvalid) {
						t.Fatalf("err = %v", err)
					}
				})
			})
		}
		want := storage.AllocationSettings{Policy: "fair", FairLabel: "tenant", Weights: map[string]int{"a": 2, "b": 1},
			Params: []abi.Label{{Key: "mode", Value: "x"}}}
		mustNil(t, e.s.SetAllocation(ctx, want))
		got := ok(e.s.Allocation(ctx))(t)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		if p := fmt.Sprint(got.AllParams()); p != "[{fair_label tenant} {mode x} {weights a=2,b=1}]" {
			t.Fatalf("params %s", p)
		}
		mustNil(t, e.s.SetAllocation(ctx, storage.AllocationSettings{}))
		if a := ok(e.s.Allocation(ctx))(t); a.Policy != "" || a.FairLabel != "" || a.Weights != nil {
			t.Fatalf("reset %+v", a)
		}
		if _, err := limits.ParseWeights("a=2,b"); err == nil {
			t.Fatal("a=2,b parsed")
		}
	})
}

// TestStore_AllocationState: the window of the launched queue (oldest k
// and newest k), live capacity and who holds slots, in one read.
func TestStore_AllocationState(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := launched(t, e, 1, 2, 1, 1, 1) // ra..re
		mustNil(t, e.s.RegisterWorker(ctx, "w1", 3, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "w0", 1, time.Minute))
		v := ok(e.s.AllocationState(ctx, 2, true))(t)
		if fmt.Sprint(v.Launched) != "[ra rb rd re]" || v.Total != 5 || v.Oldest != 2 {
			t.Fatalf("window %v total %d oldest %d", v.Launched, v.Total, v.Oldest)
		}
		v = ok(e.s.AllocationState(ctx, 3, false))(t)
		if fmt.Sprint(v.Launched) != "[ra rb rc rd re]" || v.Oldest != 5 {
			t.Fatalf("overlapping window %v oldest %d", v.Launched, v.Oldest)
		}
		if v.Free != 4 || v.Slots != 4 || fmt.Sprint(v.Workers) != "[{w0 1 1 [] []} {w1 3 3 [] []}]" || len(v.Holding) != 0 {
			t.Fatalf("capacity %+v", v)
		}
		res := ok(e.s.AllocateBatch(ctx, f, []string{"rb"}))(t)
		if res[0].Outcome != storage.AllocAllocated {
			t.Fatalf("allocate %+v", res)
		}
		v = ok(e.s.AllocationState(ctx, 10, false))(t)
		if v.Free != 2 || v.Holding["rb"] != 2 || fmt.Sprint(v.Launched) != "[ra rc rd re]" {
			t.Fatalf("after allocating rb: %+v", v)
		}
		// the launched runs' index follows the queue: rb left it when placed,
		// a stopped LAUNCHED run leaves it too
		if n := e.c.HLen(ctx, keyspace.Of(e.s).LaunchInfo()).Val(); n != 4 {
			t.Fatalf("linfo holds %d, want 4", n)
		}
		ok(e.s.RequestStop(ctx, "rc", "x"))(t)
		if ids := e.c.HKeys(ctx, keyspace.Of(e.s).LaunchInfo()).Val(); fmt.Sprint(sortedCopy(ids)) != "[ra rd re]" {
			t.Fatalf("linfo %v", ids)
		}
		li := ok(e.s.AllocInfos(ctx, []string{"ra"}))(t)[0].Run
		if li.Group != "g" || li.Seq == 0 || li.LaunchedAt == 0 || li.Slots != 1 {
			t.Fatalf("from the index: %+v", li)
		}
		infos := ok(e.s.AllocInfos(ctx, []string{"rb", "nope"}))(t) // rb from its run hash
		r := infos[0].Run
		if !infos[0].OK || infos[1].OK || r.Group != "g" || r.Slots != 2 || r.Seq == 0 || r.LaunchedAt == 0 {
			t.Fatalf("infos %+v", infos)
		}
	})
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
