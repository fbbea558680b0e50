package policies

import (
	"encoding/binary"
	"unsafe"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

// decideFast takes a serial decision in the indexed form (ABI v3,
// abicodec.DecisionRunIndex: what the C and Rust SDKs write) from the guest's
// bytes to d in one pass: decoding, validating and copying out each action
// as it reads it, instead of the general path's four passes (decode,
// resolve, check, copy). It needs the snapshot indexed (indexSerial) and
// is only an accelerator: it returns false, leaving d to be reset, at the
// first thing it does not accept (any other form, anything the general path
// would report), and the caller then runs the general path, whose messages
// are the only ones. It returns true only for a decision the general path
// accepts with the same result (FuzzDecideFast holds that).
//
// One function on purpose: it is the hot path of every indexed decision
// (BenchmarkHostPath), and a call per action or per check costs it.
func (inst *instance) decideFast(out []byte, s *abi.SerialSnapshot, version uint32, d *abi.SerialDecision) bool {
	le := binary.LittleEndian
	if version < 3 || len(out) < abicodec.SerialDecisionHeaderSize ||
		le.Uint32(out[0:4]) != abicodec.TagSerialDecision || le.Uint32(out[8:12]) != abicodec.DecisionRunIndex {
		return false
	}
	runs := uint64(len(s.Active) + len(s.Waiting))
	n := uint64(le.Uint32(out[4:8]))
	if n > runs+1 || abicodec.SerialDecisionHeaderSize+n*abicodec.ActionSize > uint64(len(out)) {
		return false
	}
	v := &inst.v
	if cap(v.seen) < int(runs) {
		v.seen = make([]int32, runs)
	}
	v.seen = v.seen[:runs]
	clear(v.seen)
	if cap(d.Actions) < int(n) {
		d.Actions = make([]abi.Action, 0, n)
	}
	d.Actions = d.Actions[:0]
	launches, stops := 0, 0
	var (
		last         string // the previous reason, interned, and where its bytes are
		lastO, lastL uint64
	)
	recs := out[abicodec.SerialDecisionHeaderSize : abicodec.SerialDecisionHeaderSize+n*abicodec.ActionSize]
	for len(recs) >= abicodec.ActionSize {
		rec := recs[:abicodec.ActionSize]
		recs = recs[abicodec.ActionSize:]
		o, l := uint64(le.Uint32(rec[12:16])), uint64(le.Uint32(rec[16:20]))
		if o+l > uint64(len(out)) || l > MaxReasonLen {
			return false
		}
		var reason string
		switch {
		case l == 0:
		case o == lastO && l == lastL:
			reason = last // the bytes of the previous action's reason (the SDKs write a repeat once)
		default:
			reason = inst.intern(unsafe.String(&out[o], int(l)))
			last, lastO, lastL = reason, o, l
		}
		kind := abi.ActionKind(rec[0])
		switch k := le.Uint32(rec[0:4]); k {
		case uint32(abi.ActionDiscardBelow):
			seq := le.Uint64(rec[4:12])
			if d.Below != 0 || seq == 0 || len(s.Waiting) == 0 || seq > s.Waiting[len(s.Waiting)-1].Seq+1 {
				return false
			}
			d.Below, d.BelowReason = seq, reason
			continue
		case uint32(abi.ActionLaunch), uint32(abi.ActionDiscard), uint32(abi.ActionStop):
		default:
			return false
		}
		j := uint64(le.Uint32(rec[4:8]))
		if j >= runs || v.seen[j] != 0 {
			return false
		}
		v.seen[j] = 1
		r := v.run(s, int(j))
		if kind == abi.ActionStop {
			if r.State != abi.StateLaunched && r.State != abi.StateRunning {
				return false
			}
			stops++
		} else {
			if r.State != abi.StateWaiting {
				return false
			}
			if kind == abi.ActionLaunch {
				launches++
			}
		}
		// fields written in place: cheaper than storing a composite literal
		k := len(d.Actions)
		d.Actions = d.Actions[:k+1]
		a := &d.Actions[k]
		a.Kind, a.Run, a.Reason = kind, r.ID, reason
	}
	if launches > 0 {
		running := -stops
		for i := range s.Active {
			if s.Active[i].State != abi.StateStopping {
				running++
			}
		}
		if running+launches > int(s.EffectiveMaxActive()) {
			return false
		}
	}
	return true
}
