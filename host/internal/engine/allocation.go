package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Allocation as a policy (issue 26): each slot-manager pass reads the
// launched runs waiting for slots and the live capacity in one pipelined
// round trip (storage.Store.AllocationState), sends them with the
// namespace's parameters to its allocation policy (namespace set
// --allocate; default fifo), and places the runs in the order it returns,
// with backfill and the slot guard (allocate_batch). What a run needs of
// the policy (group, seq, slots, priority, launch time, labels) cannot
// change while it is LAUNCHED or RUNNING, so it is read once per run
// (storage.Store.AllocInfos) and kept while the run waits or holds slots.
//
// A policy that traps, times out or returns an invalid order changes
// nothing: the pass uses the previous policy that decided well (kept
// loaded for that), or launch order when there is none, and the failure
// is counted and logged once per episode, and counts toward the
// auto-rollback of a pushed version like a serial policy's. An order that
// places nothing while runs fit the free slots is valid once (a run the
// order leaves out waits), but MaxIdleAllocationPasses of them in a row
// are an invalid decision: no valid-but-useless order holds slots idle.
//
// Whatever the order, a launched run that does not fit the free slots and
// has waited the slot guard goes first (guardFirst): the pass stops at it
// and the slots that free up are held for it, as under fifo.

// allocState is the slot manager's allocation memory (guarded by its mu
// only where noted: Pass runs on one goroutine).
type allocState struct {
	info    map[string]abi.AllocRun // LAUNCHED and slot-holding runs read so far
	placed  map[string]struct{}     // of them, those seen holding slots (gone from info once they hold none)
	free    int                     // free slots at the last pass (-1: unknown): sizes the next window
	inPlace bool                    // the last pass ordered by launch itself (the built-in fifo)
	// the namespace's allocation settings, read at setAt under policy
	// generation setGen
	settings storage.AllocationSettings
	setGen   int64
	setAt    time.Time
	good     *PolicyRef // the last version that decided well (held)
	failing  string     // the policy failing now ("" = none): logged once
	idle     int        // passes in a row whose order placed nothing while runs fit (idleOrder)
	// short: launched runs a pass tried and found too few free slots for
	// (some, not enough): guardFirst puts them first once past the guard
	short map[string]struct{}
}

// MaxIdleAllocationPasses is how many slot-manager passes in a row an
// allocation policy may order no run that fits the free slots while the
// snapshot has one (an empty order, or only runs too big for them); the
// next such order is an invalid decision: counted (policy_failed), logged,
// toward auto-rollback, and the pass falls back as for a trap.
const MaxIdleAllocationPasses = 3

// ErrIdleOrder is the invalid decision of an allocation policy whose orders
// placed nothing MaxIdleAllocationPasses passes in a row while runs fit.
var ErrIdleOrder = fmt.Errorf("%w: the allocation order leaves out every run that fits the free slots", policies.ErrInvalidDecision)

// idleOrder reports whether order gives no run that fits snap's free slots
// while snap has one: a pass with it would place nothing.
func idleOrder(snap *abi.AllocationSnapshot, order []uint32) bool {
	if snap.Free == 0 {
		return false
	}
	fits := func(r abi.AllocRun) bool { return max(r.Slots, 1) <= snap.Free }
	for _, j := range order {
		if int(j) < len(snap.Runs) && fits(snap.Runs[j]) {
			return false
		}
	}
	for _, r := range snap.Runs {
		if fits(r) {
			return true
		}
	}
	return false
}

// guardFirst puts first, in launch order, the runs of snap that do not fit
// (they need more slots than are free now, or an earlier pass found some
// free slots but too few for them: short) and have waited guard since their
// launch (now, unix ms), then order without them: the pass holds the freed
// slots for such a run whatever the policy's order (allocate_batch holds a
// misfit past the guard and stops there), and places it once they are
// enough. A run that fits is left where the policy put it: putting every
// old run first would make every policy fifo under load.
func guardFirst(snap *abi.AllocationSnapshot, order []uint32, now int64, guard time.Duration, short map[string]struct{}) []uint32 {
	var first []uint32
	for j, r := range snap.Runs {
		_, misfit := short[r.ID]
		if (misfit || max(r.Slots, 1) > snap.Free) && now-r.LaunchedAt >= guard.Milliseconds() {
			first = append(first, uint32(j))
		}
	}
	if len(first) == 0 {
		return order
	}
	out := append(make([]uint32, 0, len(first)+len(order)), first...)
	for _, j := range order {
		if !slices.Contains(first, j) {
			out = append(out, j)
		}
	}
	return out
}

// allocSettingsRecheck is how long a pass trusts the allocation settings
// it read while the policy generation stays (namespace set bumps it and
// every host hears of it at once; this covers a missed message).
const allocSettingsRecheck = 5 * time.Second

// maxAllocCache bounds the runs the slot manager remembers (~150 bytes
// each): more than any window, so a deep queue's runs are read once.
const maxAllocCache = 50_000

// allocationOrder returns the launched runs of v in the order the
// namespace's allocation policy gives, and (placement) the free slots the
// pass names for some of them (storage.AllocatePass). It reads the
// allocation fields of runs it has not seen (one pipeline).
func (s *SlotManager) allocationOrder(ctx context.Context, v *storage.AllocationView) ([]string, map[string][]string, error) {
	a := &s.alloc
	a.inPlace = false
	if name := v.Settings.PolicyName(); name == limits.DefaultAllocation && v.Settings.Placement() == "" {
		if ref, err := s.rt.set.Acquire(ctx, name); err == nil {
			builtin := ref.Registry == 0
			ref.Release()
			if builtin {
				// The built-in fifo orders the runs as they launched
				// (plugins/fifo): that order is the window itself, so the
				// pass neither reads the runs' fields nor calls the
				// plugin (RATIONALE.md "Why is the built-in fifo
				// allocation launch order, computed in place?"). A pushed fifo is
				// called like any policy.
				a.info, a.placed, a.inPlace = nil, nil, true
				return dedupe(v.Launched), nil, nil
			}
		}
	}
	var missing []string
	for _, id := range v.Launched {
		if _, ok := a.info[id]; !ok {
			missing = append(missing, id)
		}
	}
	for id := range v.Holding {
		if _, ok := a.info[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		infos, err := s.rt.st.AllocInfos(ctx, missing)
		if err != nil {
			return nil, nil, err
		}
		if a.info == nil {
			a.info = map[string]abi.AllocRun{}
		}
		for _, in := range infos {
			if in.OK {
				a.info[in.Run.ID] = in.Run
			}
		}
	}
	snap, keep := BuildAllocationSnapshot(v, a.info)
	// Keep what was read of a run while it waits (it may leave the
	// window for the middle of a deep queue and come back) or holds slots;
	// a run that held slots and holds none is done.
	if a.placed == nil {
		a.placed = map[string]struct{}{}
	}
	for id := range v.Holding {
		a.placed[id] = struct{}{}
	}
	for id := range a.placed {
		if _, ok := v.Holding[id]; !ok {
			delete(a.placed, id)
			delete(a.info, id)
		}
	}
	if len(a.info) > maxAllocCache { // runs stopped while they waited: start over
		a.info = keep
	}
	name := v.Settings.PolicyName()
	for id := range a.short { // only the runs still waiting in the window
		if _, ok := keep[id]; !ok {
			delete(a.short, id)
		}
	}
	d := s.decideOrder(ctx, name, snap)
	order := guardFirst(snap, d.Order, snap.Now, s.rt.cfg.SlotGuard, a.short)
	out := make([]string, len(order))
	for i, j := range order {
		out[i] = snap.Runs[j].ID
	}
	return out, placeRuns(snap, &d, order, v.Settings.Placement(), v.FreeSlots), nil
}

// placeRuns names the free slots each run of order takes (nil: none named,
// every run takes the first free slots it may use, as without a
// placement): with placement "policy" the worker d names for it
// (validated: it takes the run and has the free slots), else the worker
// the placement picks among those that take the run and have its slots
// free: spread (and policy) the one with the most free
// slots, pack the one with the most slots in use (then the fewest free);
// a run without requirements prefers workers without a profile.
// The slots named are the worker's that were free when the view was read,
// less those named for the runs before; a run no worker can take now gets
// none (the pass tries it as any run, and it does not fit).
func placeRuns(snap *abi.AllocationSnapshot, d *abi.AllocationDecision, order []uint32, placement string, freeSlots map[string][]string) map[string][]string {
	if placement == "" || freeSlots == nil {
		return nil
	}
	named := map[uint32]int32{}
	for pos, w := range d.Workers {
		if w != abi.HostChooses && placement == abi.PlacementPolicy {
			named[d.Order[pos]] = w
		}
	}
	free := make([]uint32, len(snap.Workers)) // left to name
	for i := range snap.Workers {
		free[i] = min(snap.Workers[i].Free, uint32(len(freeSlots[snap.Workers[i].Worker])))
	}
	out := map[string][]string{}
	for _, j := range order {
		r := &snap.Runs[j]
		k := max(r.Slots, 1)
		w, ok := named[j]
		if !ok || free[w] < k {
			w = pickWorker(snap, r, k, free, placement == abi.PlacementPack)
			if w < 0 {
				continue
			}
		}
		ws := freeSlots[snap.Workers[w].Worker]
		at := uint32(len(ws)) - free[w]
		out[r.ID] = ws[at : at+k]
		free[w] -= k
	}
	return out
}

// pickWorker is the index of the worker r goes to (k slots; free: each
// worker's slots left to name), or -1 when none takes it with k free: the
// one with the highest score for r's preferences (WorkerCapacity.Score), then
// as the placement says. A
// run without requirements goes to a worker without labels or groups
// first (as the scripts' first free slots do: labelled workers stay free
// for the runs that need them).
func pickWorker(snap *abi.AllocationSnapshot, r *abi.AllocRun, k uint32, free []uint32, pack bool) int32 {
	best := int32(-1)
	plain := func(w *abi.WorkerCapacity) bool {
		return len(r.Require) > 0 || len(w.Labels) == 0 && len(w.Groups) == 0
	}
	for i := range snap.Workers {
		w := &snap.Workers[i]
		if free[i] < k || !w.Takes(r) {
			continue
		}
		if best < 0 {
			best = int32(i)
			continue
		}
		b := &snap.Workers[best]
		if len(r.Prefer) > 0 { // the worker that carries the most of its preferences first
			if sw, sb := w.Score(r), b.Score(r); sw != sb {
				if sw > sb {
					best = int32(i)
				}
				continue
			}
		}
		if pw, pb := plain(w), plain(b); pw != pb {
			if pw {
				best = int32(i)
			}
			continue
		}
		if pack {
			used, bused := w.Slots-free[i], b.Slots-free[best]
			if used > bused || used == bused && free[i] < free[best] {
				best = int32(i)
			}
		} else if free[i] > free[best] {
			best = int32(i)
		}
	}
	return best
}

// BuildAllocationSnapshot is the allocation snapshot of v, with the runs'
// fields from info (runs missing from it are left out); keep is info
// narrowed to the runs of v (launched or holding slots).
func BuildAllocationSnapshot(v *storage.AllocationView, info map[string]abi.AllocRun) (snap *abi.AllocationSnapshot, keep map[string]abi.AllocRun) {
	ids := dedupe(v.Launched)
	snap = &abi.AllocationSnapshot{Now: v.Now.UnixMilli(), Free: uint32(v.Free), Total: uint32(v.Slots),
		LaunchedTotal: uint32(v.Total), Oldest: uint32(min(v.Oldest, len(ids))), Workers: v.Workers,
		Params: v.Settings.AllParams()}
	keep = make(map[string]abi.AllocRun, len(ids)+len(v.Holding))
	for _, id := range ids {
		if r, ok := info[id]; ok {
			snap.Runs = append(snap.Runs, r)
			keep[id] = r
		}
	}
	snap.Usage = usage(v.Holding, info, keep)
	return snap, keep
}

// ReadAllocationSnapshot reads the namespace's allocation snapshot as
// the leader's next pass would see it (a window of k oldest and k newest
// launched runs), writing nothing: for dry-runs and explain.
func ReadAllocationSnapshot(ctx context.Context, st *storage.Store, k int) (*abi.AllocationSnapshot, storage.AllocationSettings, error) {
	v, err := st.AllocationState(ctx, max(k, 1), true)
	if err != nil {
		return nil, storage.AllocationSettings{}, err
	}
	ids := dedupe(v.Launched)
	for id := range v.Holding {
		ids = append(ids, id)
	}
	infos, err := st.AllocInfos(ctx, ids)
	if err != nil {
		return nil, v.Settings, err
	}
	info := make(map[string]abi.AllocRun, len(infos))
	for _, in := range infos {
		if in.OK {
			info[in.Run.ID] = in.Run
		}
	}
	snap, _ := BuildAllocationSnapshot(&v, info)
	return snap, v.Settings, nil
}

// decideOrder asks policy name, else the last good version, else gives
// launch order (no workers named).
func (s *SlotManager) decideOrder(ctx context.Context, name string, snap *abi.AllocationSnapshot) abi.AllocationDecision {
	a := &s.alloc
	ref, err := s.rt.set.Acquire(ctx, name)
	var bad *PolicyRef // the version that failed (not its own fallback)
	if err == nil {
		t0 := time.Now()
		var d abi.AllocationDecision
		d, err = ref.Policy.DecideAllocation(ctx, snap)
		s.rt.m.call(name, "allocation", time.Since(t0))
		if err == nil && idleOrder(snap, d.Order) {
			// valid, but it places nothing: let it be a few passes (the
			// runs it leaves out wait), not for good
			if a.idle++; a.idle <= MaxIdleAllocationPasses {
				ref.Release()
				return d
			}
			err = fmt.Errorf("%w (%d passes in a row, %d free slots, %d launched runs in the snapshot)",
				ErrIdleOrder, a.idle, snap.Free, len(snap.Runs))
		} else if err == nil {
			a.idle = 0
		}
		if err == nil {
			ref.Succeeded()
			if a.failing != "" {
				s.rt.log.Info("allocation policy decides again", "policy", name, "version", ref.Version)
				a.failing = ""
			}
			if a.good != ref {
				if a.good != nil {
					a.good.Release()
				}
				a.good = ref // keep the hold: the fallback while a successor fails
			} else {
				ref.Release()
			}
			return d
		}
		if ctx.Err() != nil {
			ref.Release()
			return abi.AllocationDecision{Order: launchOrder(snap)}
		}
		ref.Failed(ctx, policyOutcome(err), err)
		ref.Release()
		bad = ref
	}
	if ctx.Err() != nil {
		return abi.AllocationDecision{Order: launchOrder(snap)}
	}
	s.outcome("policy_failed")
	if a.failing != name {
		a.failing = name
		to := "launch order (fifo)"
		if a.good != nil && a.good != bad {
			to = a.good.Name + " " + a.good.Version
		}
		s.rt.log.Warn("allocation policy failed; the namespace keeps allocating with its previous policy", "policy", name,
			"outcome", policyOutcome(err), "instead", to, "err", err)
	}
	if a.good != nil && a.good != bad {
		if d, gerr := a.good.Policy.DecideAllocation(ctx, snap); gerr == nil && !idleOrder(snap, d.Order) {
			return d
		}
	}
	return abi.AllocationDecision{Order: launchOrder(snap)}
}

// releaseAllocation lets go of the fallback version (end of the term).
func (s *SlotManager) releaseAllocation() {
	if s.alloc.good != nil {
		s.alloc.good.Release()
		s.alloc.good = nil
	}
	s.alloc.info, s.alloc.placed, s.alloc.setAt, s.alloc.inPlace, s.alloc.idle, s.alloc.short = nil, nil, time.Time{}, false, 0, nil
	s.placing.Store(0)
}

func launchOrder(snap *abi.AllocationSnapshot) []uint32 {
	out := make([]uint32, len(snap.Runs))
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

func dedupe(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

// usage sums the slots held per group and per label value (the groups
// first, then label values; each by slots held, most first), at most
// abi.MaxAllocationUsage entries. Holding runs are kept in keep.
func usage(holding map[string]int, info, keep map[string]abi.AllocRun) []abi.SlotUsage {
	type key struct{ k, v string }
	sum := map[key]*abi.SlotUsage{}
	add := func(k, v string, n int) {
		u := sum[key{k, v}]
		if u == nil {
			u = &abi.SlotUsage{Key: k, Value: v}
			sum[key{k, v}] = u
		}
		u.Slots += uint32(n)
		u.Runs++
	}
	for id, n := range holding {
		r, ok := info[id]
		if !ok {
			continue
		}
		keep[id] = r
		add("", r.Group, n)
		for _, l := range r.Labels {
			add(l.Key, l.Value, n)
		}
	}
	out := make([]abi.SlotUsage, 0, len(sum))
	for _, u := range sum {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b abi.SlotUsage) int {
		if (a.Key == "") != (b.Key == "") {
			if a.Key == "" {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.Slots, a.Slots); c != 0 {
			return c
		}
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	if len(out) > abi.MaxAllocationUsage {
		out = out[:abi.MaxAllocationUsage]
	}
	return out
}
