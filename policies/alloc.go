package policies

import (
	"context"
	"fmt"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/abicodec"
	"github.com/wasmsched/wasmsched/internal/digest"
)

// DecideAllocation asks an allocation policy for the order in which the
// runs of s get slots, and validates it (ValidateAllocation) before
// returning it. Errors as DecideSerial's; after any error from the guest
// its instance is thrown away.
func (p *Policy) DecideAllocation(ctx context.Context, s *abi.AllocationSnapshot) (abi.AllocationDecision, error) {
	if p.kind != abi.KindAllocation {
		return abi.AllocationDecision{}, fmt.Errorf("%w: policy %q is %s, not allocation", ErrKind, p.name, p.kind)
	}
	inst, out, usable, err := p.decideRecord(ctx, func(b []byte) []byte { return abicodec.AppendAllocationSnapshot(b, s) })
	if err != nil {
		return abi.AllocationDecision{}, err
	}
	// The claimed length is checked before anything is decoded: a guest
	// cannot make the host allocate more than one index per run.
	if n := abicodec.AllocationOrderLen(out); n > uint64(len(s.Runs)) {
		var probs problems
		probs.add("an order of %d runs for a snapshot of %d", n, len(s.Runs))
		err = p.callError(ctx, inst, probs.err(false))
		p.release(inst, false)
		return abi.AllocationDecision{}, err
	}
	if p.abi < 5 && abicodec.AllocationPlaces(out) {
		var probs problems
		probs.add("names workers, which needs ABI version 5 (the plugin exports %d)", p.abi)
		err = p.callError(ctx, inst, probs.err(false))
		p.release(inst, false)
		return abi.AllocationDecision{}, err
	}
	var d abi.AllocationDecision
	if err := abicodec.DecodeAllocationDecision(out, &d); err != nil {
		err = p.callError(ctx, inst, fmt.Errorf("%w: undecodable output: %v", ErrInvalidDecision, err))
		p.release(inst, false)
		return abi.AllocationDecision{}, err
	}
	verr := ValidateAllocation(s, &d)
	p.release(inst, usable)
	if verr != nil {
		p.rt.log.Warn("policy returned an invalid decision", "policy", p.name, "version", p.version, "kind", "allocation", "err", verr)
		return d, fmt.Errorf("policy %q (%s): %w", p.name, digest.Short(p.version), verr)
	}
	return d, nil
}

// ValidateAllocation checks an allocation decision against its snapshot:
// every index names a run of the snapshot, none twice; a worker it names
// (Workers) is one of the snapshot's, takes the run (serves its group,
// carries its requirements) and has the free slots of every run named on
// it. It returns nil or a *ValidationError (ErrInvalidDecision).
func ValidateAllocation(s *abi.AllocationSnapshot, d *abi.AllocationDecision) error {
	var probs problems
	if len(d.Order) > len(s.Runs) {
		probs.add("an order of %d runs for a snapshot of %d", len(d.Order), len(s.Runs))
	}
	seen := make([]bool, len(s.Runs))
	for pos, i := range d.Order {
		switch {
		case int(i) >= len(s.Runs):
			probs.add("order[%d]: run index %d beyond the snapshot's %d runs", pos, i, len(s.Runs))
		case seen[i]:
			probs.add("order[%d]: run %s (index %d) twice", pos, qid(s.Runs[i].ID), i)
		default:
			seen[i] = true
		}
	}
	if !probs.empty() {
		return probs.err(false)
	}
	validatePlacement(s, d, &probs)
	if !probs.empty() {
		return probs.err(false)
	}
	return nil
}

// validatePlacement adds the problems of d's workers (the order's indices
// are valid).
func validatePlacement(s *abi.AllocationSnapshot, d *abi.AllocationDecision, probs *problems) {
	if len(d.Workers) == 0 {
		return
	}
	if len(d.Workers) != len(d.Order) {
		probs.add("%d workers for an order of %d runs (want as many)", len(d.Workers), len(d.Order))
		return
	}
	var used []uint32 // slots named on each worker
	for pos, w := range d.Workers {
		if w == abi.HostChooses {
			continue
		}
		r := &s.Runs[d.Order[pos]]
		if w < 0 || int(w) >= len(s.Workers) {
			probs.add("workers[%d]: run %s on worker index %d, beyond the snapshot's %d workers", pos, qid(r.ID), w, len(s.Workers))
			continue
		}
		wk := &s.Workers[w]
		switch {
		case !wk.Serves(r.Group):
			probs.add("workers[%d]: run %s on worker %s, which does not serve group %s", pos, qid(r.ID), qid(wk.Worker), qid(r.Group))
			continue
		case !wk.Carries(r.Require):
			probs.add("workers[%d]: run %s on worker %s, which lacks its requirements %s", pos, qid(r.ID), qid(wk.Worker), labelList(r.Require))
			continue
		}
		if used == nil {
			used = make([]uint32, len(s.Workers))
		}
		used[w] += max(r.Slots, 1)
		if used[w] > wk.Free {
			probs.add("workers[%d]: run %s on worker %s: %d slots named on it, %d free", pos, qid(r.ID), qid(wk.Worker), used[w], wk.Free)
		}
	}
}

// labelList is ls as "k=v,k=v".
func labelList(ls []abi.Label) string {
	out := ""
	for i, l := range ls {
		if i > 0 {
			out += ","
		}
		out += l.Key + "=" + l.Value
	}
	return out
}

// allocCase is one canned allocation snapshot of the conformance run.
type allocCase struct {
	Name     string
	Snapshot *abi.AllocationSnapshot
}

// conformanceAllocation returns the canned snapshots every allocation
// plugin must answer with a valid order: none waiting, no free slot, big
// and small runs, labels and parameters, a window of a deep queue, workers
// with placement profiles and runs with requirements (a placing policy's
// workers must hold).
func conformanceAllocation() []allocCase {
	const now = 1_700_000_100_000
	run := func(id, group string, seq uint64, slots uint32, prio int32, labels ...abi.Label) abi.AllocRun {
		return abi.AllocRun{ID: id, Group: group, Seq: seq, LaunchedAt: now - 1000 + int64(seq), Priority: prio, Slots: slots, Labels: labels}
	}
	tenant := func(v string) abi.Label { return abi.Label{Key: "tenant", Value: v} }
	workers := []abi.WorkerCapacity{{Worker: "w1", Slots: 4, Free: 2}, {Worker: "w2", Slots: 4, Free: 0}}
	fair := []abi.Label{{Key: abi.ParamFairLabel, Value: "tenant"}, {Key: abi.ParamWeights, Value: "a=2,b=1"}}
	snap := func(free uint32, runs ...abi.AllocRun) *abi.AllocationSnapshot {
		return &abi.AllocationSnapshot{Now: now, Free: free, Total: 8, LaunchedTotal: uint32(len(runs)), Oldest: uint32(len(runs)),
			Runs: runs, Workers: workers, Usage: []abi.SlotUsage{{Value: "g1", Slots: 6, Runs: 6}, {Key: "tenant", Value: "a", Slots: 6, Runs: 6}}}
	}
	withParams := func(s *abi.AllocationSnapshot) *abi.AllocationSnapshot { s.Params = fair; return s }
	deep := snap(2, run("r1", "g1", 1, 1, 0), run("r2", "g2", 2, 1, 0), run("r9998", "g1", 9998, 1, 5), run("r9999", "g3", 9999, 2, 0))
	deep.LaunchedTotal, deep.Oldest = 9_999, 2
	// placement (version 5): workers with labels and groups, runs with
	// requirements; a placing policy's workers must hold
	placed := snap(4, run("r1", "g1", 1, 1, 0), run("r2", "train", 2, 2, 0), run("r3", "g1", 3, 1, 0))
	placed.Runs[1].Require = []abi.Label{{Key: "gpu", Value: "yes"}}
	placed.Workers = []abi.WorkerCapacity{{Worker: "cpu", Slots: 4, Free: 2, Labels: []abi.Label{{Key: "zone", Value: "a"}}},
		{Worker: "gpu", Slots: 2, Free: 2, Labels: []abi.Label{{Key: "gpu", Value: "yes"}, {Key: "zone", Value: "b"}}, Groups: []string{"train*"}}}
	return []allocCase{
		{"empty", snap(2)},
		{"one", snap(2, run("r1", "g1", 1, 1, 0))},
		{"no-free-slot", snap(0, run("r1", "g1", 1, 1, 0), run("r2", "g1", 2, 1, 0))},
		{"big-and-small", snap(2, run("r1", "g1", 1, 3, 0), run("r2", "g2", 2, 1, 0), run("r3", "g2", 3, 1, 0))},
		{"priorities", snap(2, run("r1", "g1", 1, 1, -5), run("r2", "g1", 2, 1, 9), run("r3", "g2", 3, 1, 9))},
		{"fair-labels", withParams(snap(2, run("r1", "g1", 1, 1, 0, tenant("a")), run("r2", "g1", 2, 1, 0, tenant("a")),
			run("r3", "g2", 3, 1, 0, tenant("b")), run("r4", "g3", 4, 1, 0)))},
		{"deep-window", deep},
		{"placement", placed},
	}
}
