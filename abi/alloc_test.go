package abi_test

import (
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
)

func TestMatchGroup(t *testing.T) {
	for _, c := range []struct {
		pat, group string
		want       bool
	}{
		{"etl", "etl", true}, {"etl", "etl-daily", false}, {"etl-*", "etl-daily", true}, {"etl-*", "etl-", true},
		{"etl-*", "etl", false}, {"*", "", true}, {"*-daily", "etl-daily", true}, {"*-daily", "etl-weekly", false},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxcyyb", false}, {"a*a", "a", false}, {"a**", "ab", true},
	} {
		if got := abi.MatchGroup(c.pat, c.group); got != c.want {
			t.Errorf("MatchGroup(%q, %q) = %v, want %v", c.pat, c.group, got, c.want)
		}
	}
}

// A worker takes a run when it serves the run's group and carries every
// label the run requires.
func ExampleWorkerCapacity_Takes() {
	gpu := abi.WorkerCapacity{Worker: "gpu-1", Slots: 4, Free: 4,
		Labels: []abi.Label{{Key: "gpu", Value: "a100"}, {Key: "zone", Value: "eu"}}, Groups: []string{"train-*"}}
	train := abi.AllocRun{ID: "r1", Group: "train-llm", Require: []abi.Label{{Key: "gpu", Value: "a100"}}}
	report := abi.AllocRun{ID: "r2", Group: "reports"}
	fmt.Println(gpu.Takes(&train), gpu.Takes(&report))
	// Output: true false
}

// A worker's score for a run is the sum of the weights of the run's
// preferences it carries: soft, unlike requirements.
func ExampleWorkerCapacity_Score() {
	run := abi.AllocRun{ID: "r1", Group: "g", Prefer: []abi.Preference{
		{Key: "region", Value: "eu", Weight: 10}, {Key: "disk", Value: "ssd", Weight: 3}}}
	eu := abi.WorkerCapacity{Worker: "a", Labels: []abi.Label{{Key: "region", Value: "eu"}}}
	euSSD := abi.WorkerCapacity{Worker: "b", Labels: []abi.Label{{Key: "disk", Value: "ssd"}, {Key: "region", Value: "eu"}}}
	us := abi.WorkerCapacity{Worker: "c", Labels: []abi.Label{{Key: "region", Value: "us"}}}
	fmt.Println(eu.Score(&run), euSSD.Score(&run), us.Score(&run), us.Takes(&run))
	// Output: 10 13 0 true
}

// A placing allocation policy names the worker of each run it orders.
func ExampleAllocationDecision_Place() {
	s := abi.AllocationSnapshot{
		Runs:    []abi.AllocRun{{ID: "r1", Group: "g", Slots: 1}, {ID: "r2", Group: "g", Slots: 8}},
		Workers: []abi.WorkerCapacity{{Worker: "w1", Slots: 2, Free: 2}},
	}
	var d abi.AllocationDecision
	for i := range s.Runs {
		w := abi.HostChooses
		if s.Workers[0].Free >= s.Runs[i].Slots && s.Workers[0].Takes(&s.Runs[i]) {
			w = 0
		}
		d.Place(uint32(i), w)
	}
	fmt.Println(d.Order, d.Workers)
	// Output: [0 1] [0 -1]
}
