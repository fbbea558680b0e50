package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
)

// TestPolicy_DecideAllocation: a hostile allocation plugin (its mode set
// by the snapshot's "mode" parameter) is contained: loops time out, traps
// trap, lies (an unknown run, a run twice, an order longer than the
// snapshot) are invalid decisions; after each the instance is replaced
// and the next well-behaved call works. The conformance snapshots (no
// mode) pass the push gate: the gate cannot see such a plugin, the
// runtime contains it.
// placing gives s workers with profiles: w0 (gpu=no, 1 free), w1 (gpu=yes,
// group g only, 1 free), w2 (2 free, group other only), and r1 a
// requirement.
func placing(s *abi.AllocationSnapshot) *abi.AllocationSnapshot {
	s.Workers = []abi.WorkerCapacity{
		{Worker: "w0", Slots: 2, Free: 1, Labels: []abi.Label{{Key: "gpu", Value: "no"}}},
		{Worker: "w1", Slots: 2, Free: 1, Labels: []abi.Label{{Key: "gpu", Value: "yes"}}, Groups: []string{"g"}},
		{Worker: "w2", Slots: 2, Free: 2, Groups: []string{"oth*"}},
	}
	s.Free, s.Total = 4, 6
	s.Runs[0].Require = []abi.Label{{Key: "gpu", Value: "yes"}}
	return s
}

func TestPolicy_DecideAllocation(t *testing.T) {
	skipUnderRace(t)
	rt := newRT(t, Config{CallTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	wasm := readFile(t, "testdata/hostile-alloc/hostile-alloc.wasm")
	if _, err := Gate(ctx, rt, "hostile", wasm, GateOptions{Kind: abi.KindAllocation}); err != nil {
		t.Fatalf("gate: %v", err)
	}
	p, err := rt.Load(ctx, "hostile", wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if p.Kind() != abi.KindAllocation {
		t.Fatalf("kind %v", p.Kind())
	}
	snap := func(mode string) *abi.AllocationSnapshot {
		return &abi.AllocationSnapshot{Now: 1, Free: 1, Total: 2, LaunchedTotal: 3, Oldest: 3,
			Runs:   []abi.AllocRun{{ID: "r1", Group: "g", Seq: 1, Slots: 1}, {ID: "r2", Group: "g", Seq: 2, Slots: 1}, {ID: "r3", Group: "g", Seq: 3, Slots: 2}},
			Params: []abi.Label{{Key: "mode", Value: mode}}}
	}
	for _, c := range []struct {
		mode string
		want []error // any of
	}{
		{"loop", []error{ErrTimeout}}, {"trap", []error{ErrTrap}},
		{"bomb", []error{ErrTrap, ErrTimeout}}, // the memory cap or the deadline, whichever comes first
		{"unknown", []error{ErrInvalidDecision}}, {"twice", []error{ErrInvalidDecision}}, {"long", []error{ErrInvalidDecision}},
		// placement (ABI version 5): a worker beyond the snapshot, one that
		// may not take the run, more slots than it has free, a run twice
		{"place-unknown", []error{ErrInvalidDecision}}, {"place-mismatch", []error{ErrInvalidDecision}},
		{"place-full", []error{ErrInvalidDecision}}, {"place-twice", []error{ErrInvalidDecision}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			_, err := p.DecideAllocation(ctx, placing(snap(c.mode)))
			if !slices.ContainsFunc(c.want, func(w error) bool { return errors.Is(err, w) }) {
				t.Fatalf("err = %v, want one of %v", err, c.want)
			}
			d, err := p.DecideAllocation(ctx, snap("reverse"))
			if err != nil || len(d.Order) != 3 || d.Order[0] != 2 {
				t.Fatalf("after %s: %+v, %v", c.mode, d, err)
			}
		})
	}
	// a placement that holds is returned as named
	d, err := p.DecideAllocation(ctx, placing(snap("place-first")))
	if err != nil || fmt.Sprint(d.Order, d.Workers) != "[0 1 2] [1 0 -1]" {
		t.Fatalf("place-first: %v %v, %v", d.Order, d.Workers, err)
	}
	// a serial policy is not asked for an order
	if _, err := p.DecideSerial(ctx, &abi.SerialSnapshot{Group: "g"}); !errors.Is(err, ErrKind) {
		t.Fatalf("serial call on an allocation policy: %v", err)
	}
	if err := ValidateAllocation(snap(""), &abi.AllocationDecision{Order: []uint32{0, 3, 0}}); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("validate: %v", err)
	}
}

// TestValidateAllocation_placement: each way a placement can be wrong is
// refused with a message that names the run, the worker and the reason.
func TestValidateAllocation_placement(t *testing.T) {
	base := func() *abi.AllocationSnapshot {
		return placing(&abi.AllocationSnapshot{Runs: []abi.AllocRun{{ID: "r1", Group: "g", Slots: 1}, {ID: "r2", Group: "g", Slots: 1},
			{ID: "r3", Group: "g", Slots: 2}}})
	}
	for _, c := range []struct {
		name    string
		order   []uint32
		workers []int32
		want    string // "" = valid
	}{
		{"valid", []uint32{0, 1, 2}, []int32{1, 0, abi.HostChooses}, ""},
		{"none named", []uint32{2, 0}, nil, ""},
		{"count", []uint32{0, 1}, []int32{1}, "1 workers for an order of 2 runs"},
		{"unknown", []uint32{1}, []int32{7}, `run "r2" on worker index 7, beyond the snapshot's 3 workers`},
		{"negative", []uint32{1}, []int32{-2}, "worker index -2"},
		{"requirement", []uint32{0}, []int32{0}, `run "r1" on worker "w0", which lacks its requirements gpu=yes`},
		{"group", []uint32{1}, []int32{2}, `run "r2" on worker "w2", which does not serve group "g"`},
		{"full", []uint32{1, 2}, []int32{0, 0}, `run "r3" on worker "w0": 3 slots named on it, 1 free`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateAllocation(base(), &abi.AllocationDecision{Order: c.order, Workers: c.workers})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case c.want != "" && (!errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want ErrInvalidDecision with %q", err, c.want)
			}
		})
	}
}
