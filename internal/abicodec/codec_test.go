package abicodec_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

func sampleSnapshot() *abi.SerialSnapshot {
	return &abi.SerialSnapshot{
		Group: "etl-nightly", Policy: "priority", MaxActive: 2, Now: 1_700_000_000_123,
		Active: []abi.Run{
			{ID: "r1", Seq: 1, State: abi.StateRunning, Priority: -3, Slots: 2, SubmittedAt: 10, StartedAt: 20},
			{ID: "r2", Seq: 2, State: abi.StateStopping, Slots: 1, SubmittedAt: 11},
		},
		Waiting: []abi.Run{
			{ID: "r3", Seq: 3, State: abi.StateWaiting, Priority: 7, Slots: 1, SubmittedAt: 12},
			{ID: "", Seq: 1<<64 - 1, State: abi.StateWaiting, Priority: -1 << 31, Slots: 1<<32 - 1, SubmittedAt: -1},
		},
		WaitingTotal: 70_000, WaitingOldest: 1,
	}
}

func sampleReuse() *abi.ReuseRequest {
	return &abi.ReuseRequest{
		Group: "g", Now: 99,
		Run: abi.Run{ID: "run-7", Seq: 7, State: abi.StateRunning, Slots: 3, SubmittedAt: 1, StartedAt: 2},
		Slots: []abi.TaskSlot{
			{Task: 0, Worker: "w1#1#a", Index: 0, Token: "t0", Alive: true, Held: true},
			{Task: 1, Worker: "w2#2#b", Index: 5, Token: "t1", Alive: true},
			{Task: 2, Worker: "w3", Index: 1, Token: "t2", Held: true},
		},
	}
}

func TestSerialSnapshotRoundTrip(t *testing.T) {
	s := sampleSnapshot()
	b := abicodec.AppendSerialSnapshot([]byte("prefix"), s)
	if string(b[:6]) != "prefix" {
		t.Fatal("prefix clobbered")
	}
	for _, dec := range []func([]byte, *abi.SerialSnapshot) error{abicodec.DecodeSerialSnapshot, abicodec.DecodeSerialSnapshotView} {
		var got abi.SerialSnapshot
		if err := dec(b[6:], &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, s) {
			t.Fatalf("got %+v\nwant %+v", got, *s)
		}
	}
}

func TestSerialDecisionRoundTrip(t *testing.T) {
	var d abi.SerialDecision
	d.Launch("r3", "newest")
	d.Discard("r4", "")
	d.Stop("r1", "older than r3")
	var got abi.SerialDecision
	if err := abicodec.DecodeSerialDecision(abicodec.AppendSerialDecision(nil, &d), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("got %+v want %+v", got, d)
	}
	// empty decision
	if err := abicodec.DecodeSerialDecision(abicodec.AppendSerialDecision(nil, &abi.SerialDecision{}), &got); err != nil || len(got.Actions) != 0 {
		t.Fatalf("empty: %v %v", err, got)
	}
}

// TestSerialDecision_discardBelow: Below travels as one trailing action of
// kind 4 whose run reference carries the seq (ABI v2), is decoded back into
// Below/BelowReason by both decoders, and a second one, or seq 0, is
// malformed.
func TestSerialDecision_discardBelow(t *testing.T) {
	var d abi.SerialDecision
	d.Launch("r9", "newest")
	d.DiscardBelow(1<<40+7, "superseded")
	b := abicodec.AppendSerialDecision(nil, &d)
	if n := uint32(b[4]) | uint32(b[5])<<8; n != 2 {
		t.Fatalf("n_actions %d, want 2 (the launch and the discard_below)", n)
	}
	for _, dec := range []func([]byte, *abi.SerialDecision) error{abicodec.DecodeSerialDecision, abicodec.DecodeSerialDecisionView} {
		var got abi.SerialDecision
		if err := dec(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("got %+v want %+v", got, d)
		}
	}
	if d.Empty() {
		t.Fatal("Empty with a discard_below")
	}
	d.Reset()
	if !d.Empty() || d.Below != 0 || d.BelowReason != "" {
		t.Fatalf("Reset left %+v", d)
	}
	// two discard_below actions: duplicate the last action record
	two := append([]byte(nil), b[:abicodec.SerialDecisionHeaderSize+2*abicodec.ActionSize]...)
	two = append(two, b[abicodec.SerialDecisionHeaderSize+abicodec.ActionSize:]...)
	two[4] = 3
	// string offsets of the copy now point 20 bytes early: harmless, the
	// decoder refuses the second discard_below before it reads them
	var got abi.SerialDecision
	if err := abicodec.DecodeSerialDecision(two, &got); !errors.Is(err, abicodec.ErrMalformed) {
		t.Fatalf("two discard_below: %v, want abicodec.ErrMalformed", err)
	}
	zero := append([]byte(nil), b...)
	clear(zero[abicodec.SerialDecisionHeaderSize+abicodec.ActionSize+4 : abicodec.SerialDecisionHeaderSize+abicodec.ActionSize+12])
	if err := abicodec.DecodeSerialDecision(zero, &got); !errors.Is(err, abicodec.ErrMalformed) {
		t.Fatalf("discard_below 0: %v, want abicodec.ErrMalformed", err)
	}
}

// TestSerialDecision_indexed: the indexed form (ABI v3) carries run indexes
// instead of ids, flagged in the header; DecodeSerialDecisionRefs returns
// them, the plain decoders refuse such a record (they could only return
// empty ids), and unknown flags are malformed.
func TestSerialDecision_indexed(t *testing.T) {
	var d abi.SerialDecision
	d.Launch("", "newest")
	d.Stop("", "older")
	d.DiscardBelow(7, "superseded")
	b := abicodec.AppendSerialDecisionRefs(nil, &d, []uint32{5, 1 << 30})
	if f := binary.LittleEndian.Uint32(b[8:]); f != abicodec.DecisionRunIndex {
		t.Fatalf("flags %#x", f)
	}
	var got abi.SerialDecision
	refs := make([]uint32, 0, 1)
	indexed, err := abicodec.DecodeSerialDecisionRefs(b, &got, &refs)
	if err != nil || !indexed {
		t.Fatalf("indexed %v, err %v", indexed, err)
	}
	if !reflect.DeepEqual(got, d) || !reflect.DeepEqual(refs, []uint32{5, 1 << 30}) {
		t.Fatalf("got %+v refs %v, want %+v [5 %d]", got, refs, d, 1<<30)
	}
	for _, dec := range []func([]byte, *abi.SerialDecision) error{abicodec.DecodeSerialDecision, abicodec.DecodeSerialDecisionView} {
		if err := dec(b, &got); !errors.Is(err, abicodec.ErrMalformed) || !strings.Contains(err.Error(), "DecodeSerialDecisionRefs") {
			t.Fatalf("plain decoder on an indexed record: %v", err)
		}
	}
	// the by-id form through DecodeSerialDecisionRefs: not indexed, refs untouched
	var byID abi.SerialDecision
	byID.Launch("r1", "x")
	refs = refs[:0]
	if indexed, err := abicodec.DecodeSerialDecisionRefs(abicodec.AppendSerialDecision(nil, &byID), &got, &refs); err != nil || indexed || len(refs) != 0 || got.Actions[0].Run != "r1" {
		t.Fatalf("by id: indexed %v err %v refs %v got %+v", indexed, err, refs, got)
	}
	binary.LittleEndian.PutUint32(b[8:], 3)
	if _, err := abicodec.DecodeSerialDecisionRefs(b, &got, &refs); !errors.Is(err, abicodec.ErrMalformed) || !strings.Contains(err.Error(), "flags 0x3") {
		t.Fatalf("unknown flags: %v", err)
	}
}

func TestReuseRoundTrip(t *testing.T) {
	r := sampleReuse()
	var got abi.ReuseRequest
	if err := abicodec.DecodeReuseRequest(abicodec.AppendReuseRequest(nil, r), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, r) {
		t.Fatalf("got %+v want %+v", got, *r)
	}
	d := abi.ReuseDecision{Reason: "x", Verdicts: []abi.Verdict{abi.VerdictReuse, abi.VerdictReallocate}}
	var gd abi.ReuseDecision
	if err := abicodec.DecodeReuseDecision(abicodec.AppendReuseDecision(nil, &d), &gd); err != nil || !reflect.DeepEqual(gd, d) {
		t.Fatalf("%v %+v", err, gd)
	}
	d = abi.ReuseDecision{Fail: true, Reason: "no slots", Verdicts: []abi.Verdict{}}
	if err := abicodec.DecodeReuseDecision(abicodec.AppendReuseDecision(nil, &d), &gd); err != nil || !reflect.DeepEqual(gd, d) {
		t.Fatalf("%v %+v", err, gd)
	}
}

// Every truncation of a valid record must fail cleanly, and a wrong tag too.
func TestTruncatedAndWrongTag(t *testing.T) {
	recs := map[string][]byte{
		"snapshot": abicodec.AppendSerialSnapshot(nil, sampleSnapshot()),
		"reuse":    abicodec.AppendReuseRequest(nil, sampleReuse()),
	}
	for name, b := range recs {
		for i := 0; i < len(b); i++ {
			var s abi.SerialSnapshot
			var q abi.ReuseRequest
			var err error
			if name == "snapshot" {
				err = abicodec.DecodeSerialSnapshot(b[:i], &s)
			} else {
				err = abicodec.DecodeReuseRequest(b[:i], &q)
			}
			if !errors.Is(err, abicodec.ErrMalformed) {
				t.Fatalf("%s truncated to %d: err %v", name, i, err)
			}
		}
	}
	var d abi.SerialDecision
	if err := abicodec.DecodeSerialDecision(abicodec.AppendReuseRequest(nil, sampleReuse()), &d); !errors.Is(err, abicodec.ErrMalformed) {
		t.Fatalf("wrong tag accepted: %v", err)
	}
}

func TestHugeCountDoesNotAllocate(t *testing.T) {
	b := abicodec.AppendSerialDecision(nil, &abi.SerialDecision{})
	b[4], b[5], b[6], b[7] = 0xff, 0xff, 0xff, 0xff
	var d abi.SerialDecision
	if err := abicodec.DecodeSerialDecision(b, &d); !errors.Is(err, abicodec.ErrMalformed) {
		t.Fatal(err)
	}
}

func TestDecodeViewZeroAlloc(t *testing.T) {
	b := abicodec.AppendSerialSnapshot(nil, sampleSnapshot())
	var s abi.SerialSnapshot
	_ = abicodec.DecodeSerialSnapshotView(b, &s)
	if n := testing.AllocsPerRun(100, func() { _ = abicodec.DecodeSerialSnapshotView(b, &s) }); n != 0 {
		t.Fatalf("%v allocs per view decode", n)
	}
	var d abi.SerialDecision
	d.Launch("r3", "x")
	out := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { out = abicodec.AppendSerialDecision(out[:0], &d) }); n != 0 {
		t.Fatalf("%v allocs per encode", n)
	}
}

func TestEnums(t *testing.T) {
	for _, k := range []abi.Kind{abi.KindSerial, abi.KindSlotReuse} {
		if got, err := abi.ParseKind(k.String()); err != nil || got != k {
			t.Fatal(k, got, err)
		}
	}
	for s := abi.StateWaiting; s <= abi.StateStopping; s++ {
		if got, err := abi.ParseState(s.String()); err != nil || got != s {
			t.Fatal(s, got, err)
		}
	}
	for _, a := range []abi.ActionKind{abi.ActionLaunch, abi.ActionDiscard, abi.ActionStop} {
		if got, err := abi.ParseActionKind(a.String()); err != nil || got != a {
			t.Fatal(a, got, err)
		}
	}
	if _, err := abi.ParseKind("x"); err == nil {
		t.Fatal("bad kind parsed")
	}
	if _, err := abi.ParseState("DONE"); err == nil {
		t.Fatal("bad state parsed")
	}
}

// TestPutSerialSnapshot: encoding into a buffer that holds anything (the
// host encodes into a guest's input buffer, reused across calls) writes
// every byte: the result equals a fresh encoding.
func TestPutSerialSnapshot(t *testing.T) {
	s := sampleSnapshot()
	want := abicodec.AppendSerialSnapshot(nil, s)
	b := make([]byte, abicodec.SerialSnapshotSize(s))
	for i := range b {
		b[i] = 0xa5
	}
	abicodec.PutSerialSnapshot(b, s)
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("PutSerialSnapshot over garbage:\n%x\nwant\n%x", b, want)
	}
}
