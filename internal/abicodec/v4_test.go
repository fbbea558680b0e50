package abicodec_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

func sampleSnapshot4() *abi.SerialSnapshot {
	s := sampleSnapshot()
	s.Active[0].Labels = []abi.Label{{Key: "ref", Value: "main"}, {Key: "tenant", Value: "acme"}}
	s.Active[0].Attempt, s.Active[0].MaxAttempts = 2, 5
	s.Waiting[0].Labels = []abi.Label{{Key: "ref", Value: ""}}
	s.Waiting[0].NotBefore, s.Waiting[0].Attempt, s.Waiting[0].MaxAttempts = 1_700_000_000_000, 1, 1
	s.Params = []abi.Label{{Key: "limit", Value: "3"}, {Key: "period", Value: "1m"}}
	s.Launches = []abi.Launch{{At: 5}, {At: 6, Labels: []abi.Label{{Key: "tenant", Value: "b"}}}}
	return s
}

// norm4 makes empty slices nil, as the decoders leave them.
func norm4(s abi.SerialSnapshot) abi.SerialSnapshot {
	s = norm(s)
	if len(s.Params) == 0 {
		s.Params = nil
	} else {
		s.Params = s.Params[:len(s.Params):len(s.Params)]
	}
	if len(s.Launches) == 0 {
		s.Launches = nil
	}
	return s
}

func TestSerialSnapshot4_roundTrip(t *testing.T) {
	s := sampleSnapshot4()
	b := abicodec.AppendSerialSnapshotFor([]byte("prefix"), s, 4)
	if string(b[:6]) != "prefix" || binary.LittleEndian.Uint32(b[6:]) != abicodec.TagSerialSnapshot4 {
		t.Fatalf("prefix or tag: %x", b[:10])
	}
	if len(b)-6 != abicodec.SerialSnapshot4Size(s) {
		t.Fatalf("%d bytes, size says %d", len(b)-6, abicodec.SerialSnapshot4Size(s))
	}
	for name, dec := range map[string]func([]byte, *abi.SerialSnapshot) error{
		"copy": abicodec.DecodeSerialSnapshot, "view": abicodec.DecodeSerialSnapshotView} {
		var got abi.SerialSnapshot
		if err := dec(b[6:], &got); err != nil {
			t.Fatal(name, err)
		}
		if !reflect.DeepEqual(norm4(got), norm4(*s)) {
			t.Fatalf("%s: got %+v\nwant %+v", name, got, *s)
		}
		if got.Param("period") != "1m" || got.Active[0].Label("tenant") != "acme" || got.Waiting[1].Label("ref") != "" {
			t.Fatalf("%s: lookups: %+v", name, got)
		}
		// a v3 record decoded into the same value: no parameters or
		// launches; the copying decoder also clears the runs' v4 fields
		// (the view decoder, a guest's, leaves them: DecodeSerialSnapshotView)
		if err := dec(abicodec.AppendSerialSnapshot(nil, s), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Params) != 0 || len(got.Launches) != 0 {
			t.Fatalf("%s: a v3 decode kept v4 fields: %+v", name, got)
		}
		if name == "copy" && (got.Active[0].Labels != nil || got.Active[0].Attempt != 0 || got.Waiting[0].NotBefore != 0) {
			t.Fatalf("%s: a v3 decode kept the runs' v4 fields: %+v", name, got)
		}
	}
	// the older form is what AppendSerialSnapshotFor writes for v1 to v3
	if got := abicodec.AppendSerialSnapshotFor(nil, s, 3); !reflect.DeepEqual(got, abicodec.AppendSerialSnapshot(nil, s)) {
		t.Fatal("v3 encoding differs")
	}
}

func TestSerialSnapshot4_malformed(t *testing.T) {
	b := abicodec.AppendSerialSnapshot4(nil, sampleSnapshot4())
	var s abi.SerialSnapshot
	for i := range len(b) {
		if err := abicodec.DecodeSerialSnapshot(b[:i], &s); !errors.Is(err, abicodec.ErrMalformed) {
			t.Fatalf("truncated to %d: err %v", i, err)
		}
		if err := abicodec.DecodeSerialSnapshotView(b[:i], &s); !errors.Is(err, abicodec.ErrMalformed) {
			t.Fatalf("view, truncated to %d: err %v", i, err)
		}
	}
	le := binary.LittleEndian
	cases := map[string]func(b []byte){
		"run labels beyond the table": func(b []byte) { le.PutUint32(b[64+44:], 3) },
		"huge label count":            func(b []byte) { le.PutUint16(b[64+42:], 0xffff) },
		"launch labels beyond":        func(b []byte) { le.PutUint32(b[64+4*64+4*16+2*16+16+8:], 4) }, // launch 1 of 2
		"no label table":              func(b []byte) { le.PutUint32(b[48:], 0) },
		"huge params":                 func(b []byte) { le.PutUint32(b[52:], 1<<31) },
		"huge launches":               func(b []byte) { le.PutUint32(b[56:], 1<<31) },
	}
	for name, mut := range cases {
		c := append([]byte(nil), b...)
		mut(c)
		if err := abicodec.DecodeSerialSnapshot(c, &s); !errors.Is(err, abicodec.ErrMalformed) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestPutSerialSnapshot4_overGarbage(t *testing.T) {
	s := sampleSnapshot4()
	want := abicodec.AppendSerialSnapshot4(nil, s)
	b := make([]byte, abicodec.SerialSnapshot4Size(s))
	for i := range b {
		b[i] = 0xa5
	}
	abicodec.PutSerialSnapshot4(b, s)
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("over garbage:\n%x\nwant\n%x", b, want)
	}
}

func TestSerialDecision_wake(t *testing.T) {
	var d abi.SerialDecision
	d.Launch("r3", "x")
	d.WakeAt(2000)
	d.WakeAt(3000) // the earliest counts
	d.WakeAt(0)    // no wake: ignored
	if d.Wake != 2000 || d.Empty() {
		t.Fatalf("wake %d empty %v", d.Wake, d.Empty())
	}
	d.DiscardBelow(9, "older")
	b := abicodec.AppendSerialDecision(nil, &d)
	var got abi.SerialDecision
	if err := abicodec.DecodeSerialDecision(b, &got); err != nil || got.Wake != 2000 || got.Below != 9 || len(got.Actions) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
	// a wake alone is an empty decision (the group settles)
	var w abi.SerialDecision
	w.WakeAt(5)
	if !w.Empty() {
		t.Fatal("a wake alone is not empty")
	}
	// on the wire: a wake at 0 (or before) is in the past, two are refused
	le := binary.LittleEndian
	raw := abicodec.AppendSerialDecision(nil, &w)
	le.PutUint64(raw[abicodec.SerialDecisionHeaderSize+4:], 0)
	if err := abicodec.DecodeSerialDecision(raw, &got); err != nil || got.Wake != 1 {
		t.Fatalf("wake 0: %v %d", err, got.Wake)
	}
	le.PutUint64(raw[abicodec.SerialDecisionHeaderSize+4:], 1<<63)
	if err := abicodec.DecodeSerialDecision(raw, &got); err != nil || got.Wake != 1 {
		t.Fatalf("wake 2^63 (negative as i64): %v %d", err, got.Wake)
	}
	two := append([]byte(nil), raw[:abicodec.SerialDecisionHeaderSize]...)
	two = append(two, raw[abicodec.SerialDecisionHeaderSize:]...)
	two = append(two, raw[abicodec.SerialDecisionHeaderSize:]...)
	le.PutUint32(two[4:], 2)
	if err := abicodec.DecodeSerialDecision(two, &got); !errors.Is(err, abicodec.ErrMalformed) {
		t.Fatalf("two wakes: %v", err)
	}
}

func TestDecodeView4ZeroAlloc(t *testing.T) {
	b := abicodec.AppendSerialSnapshot4(nil, sampleSnapshot4())
	var s abi.SerialSnapshot
	_ = abicodec.DecodeSerialSnapshotView(b, &s)
	if n := testing.AllocsPerRun(100, func() { _ = abicodec.DecodeSerialSnapshotView(b, &s) }); n != 0 {
		t.Fatalf("%v allocs per view decode", n)
	}
}
