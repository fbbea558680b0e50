package abicodec_test

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

// Each fuzzer checks that the decoder never panics, and that whatever it
// accepts re-encodes to something that decodes to the same value.

func FuzzDecodeSerialSnapshot(f *testing.F) {
	f.Add(abicodec.AppendSerialSnapshot(nil, sampleSnapshot()))
	f.Add(abicodec.AppendSerialSnapshot(nil, &abi.SerialSnapshot{}))
	f.Add([]byte{1, 0, 0, 0})
	f.Add(abicodec.AppendSerialSnapshot4(nil, sampleSnapshot4()))
	f.Add(abicodec.AppendSerialSnapshot4(nil, &abi.SerialSnapshot{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s, s2, c abi.SerialSnapshot
		errView, errCopy := abicodec.DecodeSerialSnapshotView(b, &s), abicodec.DecodeSerialSnapshot(b, &c)
		if (errView == nil) != (errCopy == nil) {
			t.Fatalf("view decoder err %v, copying decoder err %v", errView, errCopy)
		}
		if errView != nil {
			return
		}
		if !reflect.DeepEqual(norm4(s), norm4(c)) {
			t.Fatalf("view %+v != copy %+v", s, c)
		}
		v := uint32(3)
		if binary.LittleEndian.Uint32(b) == abicodec.TagSerialSnapshot4 {
			v = 4
		}
		if err := abicodec.DecodeSerialSnapshot(abicodec.AppendSerialSnapshotFor(nil, &s, v), &s2); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(norm4(s), norm4(s2)) {
			t.Fatalf("%+v != %+v", s, s2)
		}
	})
}

func norm(s abi.SerialSnapshot) abi.SerialSnapshot {
	if len(s.Active) == 0 {
		s.Active = nil
	}
	if len(s.Waiting) == 0 {
		s.Waiting = nil
	}
	return s
}

func FuzzDecodeSerialDecision(f *testing.F) {
	var d abi.SerialDecision
	d.Launch("a", "b")
	d.Stop("c", "")
	f.Add(abicodec.AppendSerialDecision(nil, &d))
	f.Add(abicodec.AppendSerialDecision(nil, &abi.SerialDecision{}))
	d.DiscardBelow(42, "older")
	f.Add(abicodec.AppendSerialDecision(nil, &d))
	f.Add(abicodec.AppendSerialDecisionRefs(nil, &d, []uint32{0, 9}))
	d.WakeAt(77)
	f.Add(abicodec.AppendSerialDecision(nil, &d))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d, d2, c, r abi.SerialDecision
		var refs []uint32
		errView, errCopy := abicodec.DecodeSerialDecisionView(b, &d), abicodec.DecodeSerialDecision(b, &c)
		indexed, errRefs := abicodec.DecodeSerialDecisionRefs(b, &r, &refs)
		if (errView == nil) != (errCopy == nil) {
			t.Fatalf("view decoder err %v, copying decoder err %v", errView, errCopy)
		}
		if errRefs == nil && indexed {
			// round trip of the indexed form
			if len(refs) != len(r.Actions) {
				t.Fatalf("%d refs for %d actions", len(refs), len(r.Actions))
			}
			var r2 abi.SerialDecision
			var refs2 []uint32
			if _, err := abicodec.DecodeSerialDecisionRefs(abicodec.AppendSerialDecisionRefs(nil, &r, refs), &r2, &refs2); err != nil ||
				!reflect.DeepEqual(refs, refs2) || r.Below != r2.Below || len(r.Actions) != len(r2.Actions) {
				t.Fatalf("indexed round trip: %v, %+v %v != %+v %v", err, r, refs, r2, refs2)
			}
			return
		}
		if (errView == nil) != (errRefs == nil) {
			t.Fatalf("view decoder err %v, refs decoder err %v", errView, errRefs)
		}
		if errView != nil {
			return
		}
		if err := abicodec.DecodeSerialDecision(abicodec.AppendSerialDecision(nil, &d), &d2); err != nil {
			t.Fatal(err)
		}
		if len(d.Actions) != len(d2.Actions) || (len(d.Actions) > 0 && !reflect.DeepEqual(d.Actions, d2.Actions)) ||
			d.Below != d2.Below || d.BelowReason != d2.BelowReason || d.Below != c.Below || d.Wake != d2.Wake || d.Wake != c.Wake {
			t.Fatalf("%+v != %+v", d, d2)
		}
	})
}

func FuzzDecodeReuseRequest(f *testing.F) {
	f.Add(abicodec.AppendReuseRequest(nil, sampleReuse()))
	f.Add(abicodec.AppendReuseRequest(nil, &abi.ReuseRequest{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q, q2, c abi.ReuseRequest
		errView, errCopy := abicodec.DecodeReuseRequestView(b, &q), abicodec.DecodeReuseRequest(b, &c)
		if (errView == nil) != (errCopy == nil) {
			t.Fatalf("view decoder err %v, copying decoder err %v", errView, errCopy)
		}
		if errView != nil {
			return
		}
		if !reflect.DeepEqual(q.Run, c.Run) || q.Group != c.Group || q.Now != c.Now || len(q.Slots) != len(c.Slots) ||
			(len(q.Slots) > 0 && !reflect.DeepEqual(q.Slots, c.Slots)) {
			t.Fatalf("view %+v != copy %+v", q, c)
		}
		if err := abicodec.DecodeReuseRequest(abicodec.AppendReuseRequest(nil, &q), &q2); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(q.Run, q2.Run) || q.Group != q2.Group || len(q.Slots) != len(q2.Slots) ||
			(len(q.Slots) > 0 && !reflect.DeepEqual(q.Slots, q2.Slots)) {
			t.Fatalf("%+v != %+v", q, q2)
		}
	})
}

func FuzzDecodeReuseDecision(f *testing.F) {
	f.Add(abicodec.AppendReuseDecision(nil, &abi.ReuseDecision{Reason: "r", Verdicts: []abi.Verdict{1, 2, 1}}))
	f.Add(abicodec.AppendReuseDecision(nil, &abi.ReuseDecision{Fail: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d, d2 abi.ReuseDecision
		if abicodec.DecodeReuseDecisionView(b, &d) != nil {
			return
		}
		if err := abicodec.DecodeReuseDecision(abicodec.AppendReuseDecision(nil, &d), &d2); err != nil {
			t.Fatal(err)
		}
		if d.Fail != d2.Fail || d.Reason != d2.Reason || string(vb(d.Verdicts)) != string(vb(d2.Verdicts)) {
			t.Fatalf("%+v != %+v", d, d2)
		}
	})
}

func vb(v []abi.Verdict) []byte {
	b := make([]byte, len(v))
	for i := range v {
		b[i] = byte(v[i])
	}
	return b
}
