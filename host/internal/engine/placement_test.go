package engine

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/storage"
)

// zoneWorkers registers a1, a2 (zone a) and b1, b2 (zone b), 2 slots each.
func (e *renv) zoneWorkers() {
	e.t.Helper()
	for _, w := range []string{"a1", "a2", "b1", "b2"} {
		p := storage.WorkerPlacement{Labels: []abi.Label{{Key: "zone", Value: w[:1]}}}
		if err := e.st.RegisterWorkerWith(context.Background(), w, 2, time.Hour, p); err != nil {
			e.t.Fatal(err)
		}
	}
}

// where maps each RUNNING run of ids to the worker of its slots, and
// counts the runs per worker ("a1=2 b1=1", sorted).
func (e *renv) where(ids []string) (map[string]string, string) {
	e.t.Helper()
	on, per := map[string]string{}, map[string]int{}
	for _, id := range ids {
		r := e.run(id)
		if r.State != storage.StateRunning {
			continue
		}
		for _, a := range r.Assignments {
			if a.Worker != r.Assignments[0].Worker {
				e.t.Fatalf("%s is on %s and %s", id, r.Assignments[0].Worker, a.Worker)
			}
		}
		on[id] = r.Assignments[0].Worker
		per[on[id]]++
	}
	var parts []string
	for w, n := range per {
		parts = append(parts, fmt.Sprintf("%s=%d", w, n))
	}
	sort.Strings(parts)
	return on, fmt.Sprint(parts)
}

// TestSlotManager_placement: the namespace's placement chooses the worker
// of each run the pass places: spread balances 4 runs over 4 workers,
// pack fills a1 then a2 and leaves zone b idle, a placing policy
// (examples/zone-spread) alternates zones, and a run that requires zone=b
// goes there under each of them.
func TestSlotManager_placement(t *testing.T) {
	zoneSpread, err := os.ReadFile("../../../examples/zone-spread/zone-spread.wasm")
	if err != nil {
		t.Fatal(err)
	}
	// one namespace for the cases (a runtime each would cost seconds under
	// -race): each case's runs finish before the next
	e := newREnv(t, Config{})
	e.zoneWorkers()
	if _, err := e.st.PushPolicy(context.Background(), storage.PushRequest{Name: "zone-spread", Kind: "allocation",
		Blob: zoneSpread, Activate: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	e.group("g-only-b", "wait", 1)
	if _, err := e.st.SetGroupSettings(context.Background(), "g-only-b", storage.GroupSettings{
		Require: []abi.Label{{Key: "zone", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  storage.AllocationSettings
		want string // runs per worker
	}{
		{"spread", storage.AllocationSettings{Params: []abi.Label{{Key: abi.ParamPlacement, Value: abi.PlacementSpread}}},
			"[a1=1 a2=1 b1=1 b2=1]"},
		{"pack", storage.AllocationSettings{Params: []abi.Label{{Key: abi.ParamPlacement, Value: abi.PlacementPack}}},
			"[a1=2 a2=2]"},
		{"pack-fair", storage.AllocationSettings{Policy: "fair", FairLabel: "tenant",
			Params: []abi.Label{{Key: abi.ParamPlacement, Value: abi.PlacementPack}}}, "[a1=2 a2=2]"},
		{"zone-spread", storage.AllocationSettings{Policy: "zone-spread",
			Params: []abi.Label{{Key: abi.ParamPlacement, Value: abi.PlacementPolicy}}}, "[a1=1 a2=1 b1=1 b2=1]"},
		// without a placement: the first free slots, in identity order
		{"none", storage.AllocationSettings{}, "[a1=2 a2=2]"},
	} {
		e.setAllocation(c.set)
		p := c.name + "-"
		ids := e.launchRuns(tenantRun(p+"r1", "a", 0), tenantRun(p+"r2", "b", 0), tenantRun(p+"r3", "a", 0), tenantRun(p+"r4", "b", 0))
		if n := e.slotPass(); n != 4 {
			t.Fatalf("%s: placed %d, want 4", c.name, n)
		}
		on, per := e.where(ids)
		if per != c.want {
			t.Fatalf("%s: runs per worker %s, want %s (%v)", c.name, per, c.want, on)
		}
		if c.name == "zone-spread" && (on[p+"r1"][:1] == on[p+"r2"][:1] || on[p+"r2"][:1] == on[p+"r3"][:1]) {
			t.Fatalf("zones do not alternate: %v", on)
		}
		e.checkSlots(ids...)
		if f := e.metric("wasmsched_allocations_total", "outcome", "policy_failed"); f != 0 {
			t.Fatalf("%s: policy_failed %v", c.name, f)
		}

		// a run that requires zone=b (its group's requirement) goes there
		rb := p + "rb"
		if _, err := e.st.Submit(context.Background(), storage.SubmitRequest{Group: "g-only-b", ID: rb}); err != nil {
			t.Fatal(err)
		}
		e.rt.coord.noPlace = true
		for i := 0; i < 10 && e.pass(); i++ {
		}
		e.rt.coord.noPlace = false
		if n := e.slotPass(); n != 1 {
			t.Fatalf("%s: placed %d of the zone-b run, want 1", c.name, n)
		}
		if w := e.run(rb).Assignments[0].Worker; w[:1] != "b" {
			t.Fatalf("%s: the run requiring zone=b is on %s", c.name, w)
		}
		for _, id := range append(ids, rb) {
			e.finish(id)
		}
	}
}

// TestSlotManager_placementRoutesLaunches: with a placement, the
// coordinator's applies place no launch (each goes through a slot pass,
// where the placement chooses its worker), from a term's first apply on;
// without, they place at once.
func TestSlotManager_placementRoutesLaunches(t *testing.T) {
	e := newREnv(t, Config{})
	e.zoneWorkers()
	e.group("g", "wait", 4)
	e.submit("g", "r0", 1)
	e.submit("g", "r1", 1)
	e.pass()
	e.wantStates([]string{"r0", "r1"}, storage.StateRunning, storage.StateRunning)
	e.setAllocation(storage.AllocationSettings{Params: []abi.Label{{Key: abi.ParamPlacement, Value: abi.PlacementSpread}}})
	e.slotPass() // reads the settings
	e.submit("g", "r2", 1)
	e.submit("g", "r3", 1)
	e.pass()
	e.wantStates([]string{"r2", "r3"}, storage.StateLaunched, storage.StateLaunched)
	if n := e.slotPass(); n != 2 {
		t.Fatalf("placed %d, want 2", n)
	}
	// r0 and r1 took a1's slots (first free, identity order); spread puts
	// r2 and r3 on the emptiest workers, not a2 twice
	on, _ := e.where([]string{"r0", "r1", "r2", "r3"})
	if on["r0"] != "a1" || on["r1"] != "a1" || on["r2"] == on["r3"] || on["r2"] == "a1" || on["r3"] == "a1" {
		t.Fatalf("placements %v", on)
	}
	// a leader that just took over (no slot pass yet this term) reads the
	// settings before its first apply: it places no launch either
	e.rt.slots.placing.Store(0) // what the end of a term leaves
	e.group("g2", "wait", 4)
	e.submit("g2", "r4", 1)
	e.pass()
	e.wantStates([]string{"r4"}, storage.StateLaunched)
}

// TestSlotManager_hostilePlacement: a placing policy that names a worker
// beyond the snapshot, one that may not take the run, one with too few
// free slots, or a run twice is refused on every pass (counted as a
// policy failure) and never applied: the runs are placed by the host's
// placement (spread) instead.
func TestSlotManager_hostilePlacement(t *testing.T) {
	e := newREnv(t, Config{})
	e.zoneWorkers()
	// gpu: only for runs that require it (place-mismatch names it)
	if err := e.st.RegisterWorkerWith(context.Background(), "gpu", 4, time.Hour,
		storage.WorkerPlacement{Labels: []abi.Label{{Key: "gpu", Value: "yes"}}, Groups: []string{"train-*"}}); err != nil {
		t.Fatal(err)
	}
	for i, mode := range []string{"place-unknown", "place-mismatch", "place-full", "place-twice"} {
		if i == 0 {
			e.pushAllocation("hostile", "hostile-alloc/hostile-alloc.wasm", abi.Label{Key: "mode", Value: mode},
				abi.Label{Key: abi.ParamPlacement, Value: abi.PlacementPolicy})
		} else {
			e.setAllocation(storage.AllocationSettings{Policy: "hostile", Params: []abi.Label{{Key: "mode", Value: mode},
				{Key: abi.ParamPlacement, Value: abi.PlacementPolicy}}})
		}
		p := mode + "-"
		ids := e.launchRuns(tenantRun(p+"r1", "a", 0), tenantRun(p+"r2", "a", 0), tenantRun(p+"r3", "a", 0), tenantRun(p+"r4", "a", 0))
		if n := e.slotPass(); n != 4 {
			t.Fatalf("%s: placed %d, want 4", mode, n)
		}
		if f := e.metric("wasmsched_allocations_total", "outcome", "policy_failed"); f != float64(i+1) {
			t.Fatalf("%s: policy_failed %v, want %d (one a mode)", mode, f, i+1)
		}
		on, per := e.where(ids)
		if per != "[a1=1 a2=1 b1=1 b2=1]" {
			t.Fatalf("%s: runs per worker %s, want spread (%v)", mode, per, on)
		}
		e.checkSlots(ids...)
		for _, id := range ids {
			e.finish(id)
		}
	}
}

// TestPlaceRuns: the slots a pass names for each run, by placement.
func TestPlaceRuns(t *testing.T) {
	zone := func(z string) []abi.Label { return []abi.Label{{Key: "zone", Value: z}} }
	snap := &abi.AllocationSnapshot{
		Runs: []abi.AllocRun{{ID: "r1", Slots: 1}, {ID: "r2", Slots: 2}, {ID: "r3", Slots: 1, Require: zone("b")}},
		Workers: []abi.WorkerCapacity{
			{Worker: "a", Slots: 4, Free: 2, Labels: zone("a")},
			{Worker: "b", Slots: 4, Free: 4, Labels: zone("b")},
			{Worker: "p", Slots: 2, Free: 2}, // plain: no profile
		},
	}
	free := map[string][]string{"a": {"a#2", "a#3"}, "b": {"b#0", "b#1", "b#2", "b#3"}, "p": {"p#0", "p#1"}}
	order := []uint32{0, 1, 2}
	for _, c := range []struct {
		name      string
		placement string
		workers   []int32
		want      string
	}{
		{"none", "", nil, "map[]"},
		// plain p first for runs without requirements, then the most free
		{"spread", abi.PlacementSpread, nil, "map[r1:[p#0] r2:[b#0 b#1] r3:[b#2]]"},
		// p first, then the worker with most slots in use (a: 2 of 4)
		{"pack", abi.PlacementPack, nil, "map[r1:[p#0] r2:[a#2 a#3] r3:[b#0]]"},
		// the policy's workers; r2 named on a, which r1 left 1 free slot:
		// the host's spread (plain p first)
		{"policy", abi.PlacementPolicy, []int32{0, 0, abi.HostChooses}, "map[r1:[a#2] r2:[p#0 p#1] r3:[b#0]]"},
		// the policy's workers count only with placement "policy"
		{"policy-spread", abi.PlacementSpread, []int32{1, abi.HostChooses, 1}, "map[r1:[p#0] r2:[b#0 b#1] r3:[b#2]]"},
		{"policy-none", "", []int32{1, abi.HostChooses, 1}, "map[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &abi.AllocationDecision{Order: order, Workers: c.workers}
			got := placeRuns(snap, d, order, c.placement, free)
			if s := fmt.Sprint(got); s != c.want && !(c.want == "map[]" && got == nil) {
				t.Fatalf("got %s, want %s", s, c.want)
			}
		})
	}
	// Preferences rank the workers before the placement does: r1 prefers
	// zone a (worker a, the least free), r2 zone c (no worker: as without),
	// r3 zone b weakly and disk ssd strongly (a carries ssd).
	pref := func(ps ...abi.Preference) []abi.Preference { return ps }
	snap.Runs[0].Prefer = pref(abi.Preference{Key: "zone", Value: "a", Weight: 1})
	snap.Runs[1].Prefer = pref(abi.Preference{Key: "zone", Value: "c", Weight: 5})
	snap.Runs[2] = abi.AllocRun{ID: "r3", Slots: 1, Prefer: pref(abi.Preference{Key: "disk", Value: "ssd", Weight: 10},
		abi.Preference{Key: "zone", Value: "b", Weight: 1})}
	snap.Workers[0].Labels = []abi.Label{{Key: "disk", Value: "ssd"}, {Key: "zone", Value: "a"}}
	for _, c := range []struct {
		name, placement, want string
	}{
		{"prefer-spread", abi.PlacementSpread, "map[r1:[a#2] r2:[p#0 p#1] r3:[a#3]]"},
		{"prefer-pack", abi.PlacementPack, "map[r1:[a#2] r2:[p#0 p#1] r3:[a#3]]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &abi.AllocationDecision{Order: order}
			got := placeRuns(snap, d, order, c.placement, free)
			if s := fmt.Sprint(got); s != c.want && !(c.want == "map[]" && got == nil) {
				t.Fatalf("got %s, want %s", s, c.want)
			}
		})
	}
}
