package plugins_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// TestAllocationGuests: the C and Rust priority-first (plugins/<lang>/
// priority-first, abi/c and abi/rust's allocation kind) through the host
// path give the Go built-in's order: on the built-ins' table, on an empty
// queue, and on random windows of up to 1,000 runs with many equal
// priorities, labels, workers, usage and parameters around them (what the
// SDKs decode and the policy ignores).
func TestAllocationGuests(t *testing.T) {
	b, _ := plugins.Builtin("priority-first")
	goPolicy := cases.Load(t, "priority-first", b)
	rng := rand.New(rand.NewPCG(26, 4))
	var snaps []*abi.AllocationSnapshot
	table := []abi.AllocRun{
		{ID: "a1", Group: "ga", Seq: 1, Slots: 1}, {ID: "a2", Group: "ga", Seq: 2, Slots: 1, Priority: 5},
		{ID: "a3", Group: "ga", Seq: 3, Slots: 2}, {ID: "b1", Group: "gb", Seq: 4, Slots: 1},
		{ID: "b2", Group: "gb", Seq: 5, Slots: 1, Priority: 9}, {ID: "n1", Group: "gn", Seq: 6, Slots: 1},
	}
	snaps = append(snaps, &abi.AllocationSnapshot{Free: 2, Total: 6, LaunchedTotal: 6, Oldest: 6, Runs: table}, &abi.AllocationSnapshot{})
	for _, n := range []int{1, 2, 7, 64, 333, 1000} {
		s := &abi.AllocationSnapshot{Now: 1_700_000_000_000, Free: uint32(rng.IntN(50)), Total: 64, LaunchedTotal: uint32(n + rng.IntN(5000)),
			Oldest: uint32(n / 2), Params: []abi.Label{{Key: abi.ParamFairLabel, Value: "tenant"}, {Key: abi.ParamWeights, Value: "a=2,b=1"}}}
		for _, seq := range rng.Perm(5 * n)[:n] { // unique seqs, in no order (the window's two parts)
			r := abi.AllocRun{ID: fmt.Sprintf("run-%d-%s", seq, strings.Repeat("x", rng.IntN(40))), Group: fmt.Sprintf("g%d", rng.IntN(9)),
				Seq: uint64(seq + 1), LaunchedAt: int64(rng.IntN(1e6)), Priority: int32(rng.IntN(7) - 3), Slots: uint32(rng.IntN(4))}
			if rng.IntN(2) == 0 {
				r.Labels = []abi.Label{{Key: "region", Value: "eu"}, {Key: "tenant", Value: fmt.Sprint("t", rng.IntN(5))}}
			}
			if rng.IntN(3) == 0 { // placement (version 5), which priority-first does not read
				r.Require = []abi.Label{{Key: "zone", Value: fmt.Sprint("z", rng.IntN(3))}}
			}
			s.Runs = append(s.Runs, r)
		}
		for w := range 3 {
			s.Workers = append(s.Workers, abi.WorkerCapacity{Worker: fmt.Sprintf("w%d", w), Slots: 32, Free: uint32(w),
				Labels: []abi.Label{{Key: "zone", Value: fmt.Sprint("z", w)}}, Groups: []string{"g*", "other"}})
		}
		s.Usage = []abi.SlotUsage{{Value: "g1", Slots: 9, Runs: 3}, {Key: "tenant", Value: "t2", Slots: 4, Runs: 4}}
		snaps = append(snaps, s)
	}
	for _, lang := range cases.GuestsOf("priority-first") {
		t.Run(lang, func(t *testing.T) {
			p := cases.Load(t, lang+"-priority-first", cases.GuestWasm(t, lang, "priority-first"))
			if p.Kind() != abi.KindAllocation || p.ABIVersion() != abi.Version {
				t.Fatalf("kind %v, ABI %d: want allocation, %d", p.Kind(), p.ABIVersion(), abi.Version)
			}
			for i, s := range snaps {
				want, err := goPolicy.DecideAllocation(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.DecideAllocation(context.Background(), s)
				if err != nil {
					t.Fatalf("snapshot %d (%d runs): %v", i, len(s.Runs), err)
				}
				if len(got.Order) != len(s.Runs) || !slices.Equal(got.Order, want.Order) {
					t.Fatalf("snapshot %d (%d runs): order %v, the Go built-in's %v", i, len(s.Runs), head(got.Order), head(want.Order))
				}
			}
		})
	}
}

func head(o []uint32) []uint32 { return o[:min(len(o), 12)] }

// TestByLabelGuests: the C and Rust by-label examples (plugins/<lang>/
// by-label) read labels, parameters and the slots in use through the
// host's encoding: on random windows both give the order computed here
// (the runs of groups below the cap, by their label's value, runs without
// it last, then by seq), with other labels, label-value usage entries of
// the same key and other parameters around to be skipped.
func TestByLabelGuests(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	type tc struct {
		s    *abi.AllocationSnapshot
		want []uint32
	}
	var table []tc
	for _, n := range []int{0, 1, 5, 40, 300, 1000} {
		for _, params := range [][]abi.Label{
			{{Key: "cap", Value: "3"}, {Key: "label", Value: "tier"}, {Key: "zz", Value: "x"}},
			{{Key: "label", Value: "tier"}},
			{{Key: "cap", Value: "2"}},
			nil,
		} {
			s := &abi.AllocationSnapshot{Now: 1, Free: 7, Total: 64, LaunchedTotal: uint32(n), Oldest: uint32(n), Params: params}
			for _, seq := range rng.Perm(3 * max(n, 1))[:n] {
				r := abi.AllocRun{ID: fmt.Sprintf("r%d", seq), Group: fmt.Sprintf("g%d", rng.IntN(6)), Seq: uint64(seq + 1), Slots: 1}
				if v := rng.IntN(4); v < 3 {
					r.Labels = []abi.Label{{Key: "alpha", Value: "1"}, {Key: "tier", Value: []string{"a", "b", "ab"}[v]}, {Key: "zeta", Value: "9"}}
				} else if rng.IntN(2) == 0 {
					r.Labels = []abi.Label{{Key: "tie", Value: "a"}, {Key: "tiers", Value: "a"}} // near misses of the key
				}
				s.Runs = append(s.Runs, r)
			}
			// groups g0..g5 hold 0..5 slots; label usage of tier values, which a group cap must not read
			for g := 5; g >= 0; g-- {
				if g > 0 {
					s.Usage = append(s.Usage, abi.SlotUsage{Value: fmt.Sprintf("g%d", g), Slots: uint32(g), Runs: 1})
				}
			}
			s.Usage = append(s.Usage, abi.SlotUsage{Key: "tier", Value: "g0", Slots: 50, Runs: 9})
			s.Workers = []abi.WorkerCapacity{{Worker: "w0", Slots: 32, Free: 3}, {Worker: "w1", Slots: 32, Free: 4}}
			cap, label := uint64(1<<63), ""
			for _, p := range params {
				switch p.Key {
				case "cap":
					c, _ := strconv.ParseUint(p.Value, 10, 64)
					cap = c
				case "label":
					label = p.Value
				}
			}
			used := map[string]uint64{}
			for _, u := range s.Usage {
				if u.Key == "" {
					used[u.Value] = uint64(u.Slots)
				}
			}
			var want []uint32
			for i, r := range s.Runs {
				if used[r.Group] < cap {
					want = append(want, uint32(i))
				}
			}
			value := func(r abi.AllocRun) (string, bool) {
				for _, l := range r.Labels {
					if label != "" && l.Key == label {
						return l.Value, true
					}
				}
				return "", false
			}
			slices.SortFunc(want, func(a, b uint32) int {
				ra, rb := s.Runs[a], s.Runs[b]
				va, ha := value(ra)
				vb, hb := value(rb)
				if ha != hb {
					if ha {
						return -1
					}
					return 1
				}
				if c := strings.Compare(va, vb); c != 0 {
					return c
				}
				return cmp.Compare(ra.Seq, rb.Seq)
			})
			table = append(table, tc{s, want})
		}
	}
	for _, lang := range cases.Guests {
		t.Run(lang, func(t *testing.T) {
			p := cases.Load(t, lang+"-by-label", cases.GuestWasm(t, lang, "by-label"))
			for i, c := range table {
				got, err := p.DecideAllocation(context.Background(), c.s)
				if err != nil {
					t.Fatalf("case %d (%d runs): %v", i, len(c.s.Runs), err)
				}
				if !slices.Equal(got.Order, c.want) {
					t.Fatalf("case %d (%d runs, params %v): order %v, want %v", i, len(c.s.Runs), c.s.Params, head(got.Order), head(c.want))
				}
			}
		})
	}
}

// TestZoneSpreadGuests: the C and Rust ports of examples/zone-spread (ABI
// version 5: placement) decide the same order and workers as the Go
// example, on random windows of up to 1,000 runs among up to 200 workers
// in up to 5 zones, with workers serving only some groups, carrying labels
// the runs require, and runs too big for any; every decision passes the
// host's validation.
func TestZoneSpreadGuests(t *testing.T) {
	goPolicy := cases.Load(t, "zone-spread", readExample(t, "zone-spread"))
	rng := rand.New(rand.NewPCG(56, 5))
	var snaps []*abi.AllocationSnapshot
	for _, n := range []int{0, 1, 7, 64, 333, 1000} {
		for _, nw := range []int{0, 1, 3, 40, 200} {
			s := &abi.AllocationSnapshot{Now: 1, LaunchedTotal: uint32(n), Oldest: uint32(n)}
			if rng.IntN(2) == 0 {
				s.Params = []abi.Label{{Key: "zone_label", Value: "rack"}}
			}
			for w := range nw {
				wk := abi.WorkerCapacity{Worker: fmt.Sprintf("w%03d", w), Slots: uint32(1 + rng.IntN(16))}
				wk.Free = uint32(rng.IntN(int(wk.Slots) + 1))
				var ls []abi.Label
				if rng.IntN(3) > 0 {
					ls = append(ls, abi.Label{Key: "gpu", Value: []string{"no", "yes"}[rng.IntN(2)]})
				}
				if rng.IntN(5) > 0 {
					ls = append(ls, abi.Label{Key: "rack", Value: fmt.Sprint("r", rng.IntN(3))})
				}
				if rng.IntN(5) > 0 {
					ls = append(ls, abi.Label{Key: "zone", Value: fmt.Sprint("z", rng.IntN(5))})
				}
				wk.Labels = ls
				switch rng.IntN(5) {
				case 0:
					wk.Groups = []string{"g1", "etl-*"}
				case 1:
					wk.Groups = []string{"*2"}
				}
				s.Workers = append(s.Workers, wk)
				s.Free += wk.Free
				s.Total += wk.Slots
			}
			for i := range n {
				r := abi.AllocRun{ID: fmt.Sprintf("run-%d", i), Group: []string{"g1", "g2", "etl-x", "other"}[rng.IntN(4)],
					Seq: uint64(i + 1), Slots: uint32(1 + rng.IntN(3))}
				if rng.IntN(4) == 0 {
					r.Require = []abi.Label{{Key: "gpu", Value: "yes"}}
				}
				if rng.IntN(30) == 0 {
					r.Slots = 99 // fits no worker
				}
				s.Runs = append(s.Runs, r)
			}
			snaps = append(snaps, s)
		}
	}
	for _, lang := range cases.Guests {
		t.Run(lang, func(t *testing.T) {
			p := cases.Load(t, lang+"-zone-spread", cases.GuestWasm(t, lang, "zone-spread"))
			if p.Kind() != abi.KindAllocation || p.ABIVersion() != abi.Version {
				t.Fatalf("kind %v, ABI %d: want allocation, %d", p.Kind(), p.ABIVersion(), abi.Version)
			}
			placed := 0
			for i, s := range snaps {
				want, err := goPolicy.DecideAllocation(context.Background(), s)
				if err != nil {
					t.Fatalf("snapshot %d: go: %v", i, err)
				}
				got, err := p.DecideAllocation(context.Background(), s)
				if err != nil {
					t.Fatalf("snapshot %d (%d runs, %d workers): %v", i, len(s.Runs), len(s.Workers), err)
				}
				if fmt.Sprint(got.Order, got.Workers) != fmt.Sprint(want.Order, want.Workers) {
					t.Fatalf("snapshot %d (%d runs, %d workers):\n got %v %v\nwant %v %v", i, len(s.Runs), len(s.Workers),
						got.Order, got.Workers, want.Order, want.Workers)
				}
				for _, w := range got.Workers {
					if w >= 0 {
						placed++
					}
				}
			}
			if placed < 1000 {
				t.Fatalf("only %d runs placed on a worker over the snapshots: the table does not test placement", placed)
			}
		})
	}
}

// readExample reads the committed wasm of examples/name.
func readExample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
