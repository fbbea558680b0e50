package policies

import (
	"context"
	"errors"
	"slices"
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
	} {
		t.Run(c.mode, func(t *testing.T) {
			_, err := p.DecideAllocation(ctx, snap(c.mode))
			if !slices.ContainsFunc(c.want, func(w error) bool { return errors.Is(err, w) }) {
				t.Fatalf("err = %v, want one of %v", err, c.want)
			}
			d, err := p.DecideAllocation(ctx, snap("reverse"))
			if err != nil || len(d.Order) != 3 || d.Order[0] != 2 {
				t.Fatalf("after %s: %+v, %v", c.mode, d, err)
			}
		})
	}
	// a serial policy is not asked for an order
	if _, err := p.DecideSerial(ctx, &abi.SerialSnapshot{Group: "g"}); !errors.Is(err, ErrKind) {
		t.Fatalf("serial call on an allocation policy: %v", err)
	}
	if err := ValidateAllocation(snap(""), &abi.AllocationDecision{Order: []uint32{0, 3, 0}}); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("validate: %v", err)
	}
}
