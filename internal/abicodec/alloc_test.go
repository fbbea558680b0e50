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
				Labels: []abi.Label{{Key: "region", Value: "eu"}, {Key: "tenant", Value: "a"}}},
			{ID: "r2", Group: "g2", Seq: 2, Slots: 1},
			{ID: "r39", Group: "g1", Seq: 39, Priority: 7, Slots: 1, Labels: []abi.Label{{Key: "tenant", Value: "b"}}},
		},
		Workers: []abi.WorkerCapacity{{Worker: "w1", Slots: 4, Free: 1}, {Worker: "w2", Slots: 4, Free: 2}},
		Usage:   []abi.SlotUsage{{Value: "g1", Slots: 4, Runs: 2}, {Key: "tenant", Value: "a", Slots: 5, Runs: 3}},
		Params:  []abi.Label{{Key: "fair_label", Value: "tenant"}, {Key: "weights", Value: "a=2,b=1"}},
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

func TestAllocationDecision_roundTrip(t *testing.T) {
	d := abi.AllocationDecision{Order: []uint32{2, 0, 7}}
	b := AppendAllocationDecision(nil, &d)
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
}
