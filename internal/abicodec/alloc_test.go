package abicodec

import (
	"errors"
	"reflect"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
)

func allocSnapshot() *abi.AllocationSnapshot {
	return &abi.AllocationSnapshot{
		Now: 1_700_000_000_123, Free: 3, Total: 8, LaunchedTotal: 40, Oldest: 2,
		Runs: []abi.AllocRun{
			{ID: "r1", Group: "g1", Seq: 1, LaunchedAt: 1_700_000_000_000, Priority: -2, Slots: 3,
				Labels: []abi.Label{{Key: "region", Value: "eu"}, {Key: "tenant", Value: "a"}},
				Prefer: []abi.Preference{{Key: "region", Value: "eu", Weight: 10}, {Key: "zone", Value: "a", Weight: 1}}},
			{ID: "r2", Group: "g2", Seq: 2, Slots: 1, Require: []abi.Label{{Key: "gpu", Value: "yes"}}},
			{ID: "r39", Group: "g1", Seq: 39, Priority: 7, Slots: 1, Labels: []abi.Label{{Key: "tenant", Value: "b"}},
				Require: []abi.Label{{Key: "gpu", Value: "yes"}, {Key: "zone", Value: "a"}},
				Prefer:  []abi.Preference{{Key: "disk", Value: "ssd", Weight: 1000}}},
		},
		Workers: []abi.WorkerCapacity{{Worker: "w1", Slots: 4, Free: 1},
			{Worker: "w2", Slots: 4, Free: 2, Labels: []abi.Label{{Key: "gpu", Value: "yes"}}, Groups: []string{"g1", "report-*"}},
			{Worker: "w3", Slots: 2, Free: 2, Groups: []string{"g2"}}},
		Usage:  []abi.SlotUsage{{Value: "g1", Slots: 4, Runs: 2}, {Key: "tenant", Value: "a", Slots: 5, Runs: 3}},
		Params: []abi.Label{{Key: "fair_label", Value: "tenant"}, {Key: "weights", Value: "a=2,b=1"}},
	}
}

func TestAllocationSnapshot_roundTrip(t *testing.T) {
	for _, s := range []*abi.AllocationSnapshot{allocSnapshot(), {Now: 5}} {
		b := AppendAllocationSnapshot([]byte("junk"), s)[4:]
		if len(b) != AllocationSnapshotSize(s) {
			t.Fatalf("size %d, encoded %d", AllocationSnapshotSize(s), len(b))
		}
		for _, view := range []bool{false, true} {
			var got abi.AllocationSnapshot
			if err := decodeAllocationSnapshot(b, &got, view); err != nil {
				t.Fatal(err)
			}
			want := *s
			norm := func(x *abi.AllocationSnapshot) {
				if len(x.Runs) == 0 {
					x.Runs = nil
				}
				if len(x.Workers) == 0 {
					x.Workers = nil
				}
				if len(x.Usage) == 0 {
					x.Usage = nil
				}
				if len(x.Params) == 0 {
					x.Params = nil
				}
			}
			norm(&got)
			norm(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("view %v:\n got %+v\nwant %+v", view, got, want)
			}
		}
	}
}

func TestAllocationSnapshot_malformed(t *testing.T) {
	good := AppendAllocationSnapshot(nil, allocSnapshot())
	cases := map[string]func(b []byte) []byte{
		"short":         func(b []byte) []byte { return b[:20] },
		"tag":           func(b []byte) []byte { put32(b, 0, TagReuseRequest); return b },
		"runs too many": func(b []byte) []byte { put32(b, 4, 1<<20); return b },
		"truncated":     func(b []byte) []byte { return b[:AllocationSnapshotHeaderSize+AllocRunSize] },
		"id beyond":     func(b []byte) []byte { put32(b, AllocationSnapshotHeaderSize+24, uint32(len(b))); return b },
		"label beyond":  func(b []byte) []byte { put32(b, AllocationSnapshotHeaderSize+40, 9); return b },
		"require beyond": func(b []byte) []byte {
			b[AllocationSnapshotHeaderSize+AllocRunSize+46] = 40
			return b
		},
		"profile labels beyond": func(b []byte) []byte {
			// the second worker's profile: after 3 runs, 3 workers, 2
			// usage, 7 labels (3 runs' labels and requirements, w2's) and
			// 2 parameters
			at := AllocationSnapshotHeaderSize + 3*AllocRunSize + 3*WorkerCapacitySize + 2*SlotUsageSize + 7*LabelSize + 2*LabelSize +
				WorkerProfileSize
			if le.Uint32(b[at:]) != 6 || b[at+4] != 1 {
				panic("the second profile is not where the test looks")
			}
			put32(b, at, 7)
			return b
		},
		"preference run beyond": func(b []byte) []byte {
			// the preference table: after the 3 profiles; r1's first
			// entry names run 3 of 3
			at := AllocationSnapshotHeaderSize + 3*AllocRunSize + 3*WorkerCapacitySize + 2*SlotUsageSize + 7*LabelSize + 2*LabelSize +
				3*WorkerProfileSize
			if le.Uint32(b[at:]) != 3 {
				panic("the preference table is not where the test looks")
			}
			put32(b, at+PreferHeaderSize, 3)
			return b
		},
		"preferences out of run order": func(b []byte) []byte {
			at := AllocationSnapshotHeaderSize + 3*AllocRunSize + 3*WorkerCapacitySize + 2*SlotUsageSize + 9*LabelSize +
				3*WorkerProfileSize + PreferHeaderSize
			put32(b, at, 2) // r1's first preference named r39: the next names r1
			return b
		},
		"preferences too many": func(b []byte) []byte {
			at := AllocationSnapshotHeaderSize + 3*AllocRunSize + 3*WorkerCapacitySize + 2*SlotUsageSize + 9*LabelSize + 3*WorkerProfileSize
			put32(b, at, 1<<30)
			return b
		},
		"no preference table": func(b []byte) []byte {
			at := AllocationSnapshotHeaderSize + 3*AllocRunSize + 3*WorkerCapacitySize + 2*SlotUsageSize + 9*LabelSize + 3*WorkerProfileSize
			return b[:at+4]
		},
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			b := mut(append([]byte(nil), good...))
			var s abi.AllocationSnapshot
			if err := DecodeAllocationSnapshot(b, &s); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// TestAllocationSnapshot_v4Reader: a version 4 reader (the label table
// by n_labels, the tables before the profiles) reads the same runs and
// workers from a snapshot with placement, its requirements and profiles
// aside.
func TestAllocationSnapshot_v4Reader(t *testing.T) {
	s := allocSnapshot()
	b := AppendAllocationSnapshot(nil, s)
	nr := uint64(le.Uint32(b[4:8]))
	rec := b[AllocationSnapshotHeaderSize+2*AllocRunSize:]
	first, n := le.Uint32(rec[40:44]), uint32(rec[44])|uint32(rec[45])<<8
	labelAt := AllocationSnapshotHeaderSize + nr*AllocRunSize + uint64(len(s.Workers))*WorkerCapacitySize + uint64(len(s.Usage))*SlotUsageSize
	var got []string
	for i := first; i < first+n; i++ {
		k, _ := str(b, b[labelAt+uint64(i)*LabelSize:][:8], false)
		got = append(got, k)
	}
	if len(got) != 1 || got[0] != "tenant" {
		t.Fatalf("run r39's labels as a v4 reader sees them: %v", got)
	}
}

func TestAllocationDecision_roundTrip(t *testing.T) {
	d := abi.AllocationDecision{Order: []uint32{2, 0, 7}}
	b := AppendAllocationDecision(nil, &d)
	if AllocationPlaces(b) {
		t.Fatal("an order without workers places")
	}
	if AllocationOrderLen(b) != 3 {
		t.Fatalf("order len %d", AllocationOrderLen(b))
	}
	var got abi.AllocationDecision
	if err := DecodeAllocationDecision(b, &got); err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("got %+v, %v", got, err)
	}
	put32(b, 4, 4) // claims one more than it holds
	if err := DecodeAllocationDecision(b, &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	if err := DecodeAllocationDecision(b[:8], &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short: err = %v", err)
	}

	// with workers (version 5): one per entry of the order, HostChooses
	// padded
	var pd abi.AllocationDecision
	pd.Place(2, 1)
	pd.Place(0, abi.HostChooses)
	pd.Order = append(pd.Order, 7) // (Workers shorter than Order: padded)
	b = AppendAllocationDecision(nil, &pd)
	if !AllocationPlaces(b) {
		t.Fatal("an order with workers does not place")
	}
	if err := DecodeAllocationDecision(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := []int32{1, abi.HostChooses, abi.HostChooses}; !reflect.DeepEqual(got.Workers, want) || !reflect.DeepEqual(got.Order, pd.Order) {
		t.Fatalf("got %+v, want workers %v", got, want)
	}
	put32(b, 8, 2) // two workers for an order of 3
	if err := DecodeAllocationDecision(b, &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("workers count: err = %v, want ErrMalformed", err)
	}
	put32(b, 8, 3)
	if err := DecodeAllocationDecision(b[:len(b)-4], &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated workers: err = %v, want ErrMalformed", err)
	}
}
