package policies

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

// fastSnapshot: runs 0 s1 STOPPING, 1 r2 RUNNING, 2 l3 LAUNCHED, then
// waiting 3 w4 to 6 w7 (seqs 4 to 7).
func fastSnapshot(maxActive uint32) *abi.SerialSnapshot {
	W, R, L, S := t.Waiting, t.Running, t.Launched, t.Stopping
	return t.Snapshot("p", maxActive, []abi.Run{S("s1", 1), R("r2", 2), L("l3", 3)},
		[]abi.Run{W("w4", 4), W("w5", 5), W("w6", 6), W("w7", 7)})
}

// bothPaths runs decideFast and decideGeneral on the same bytes, as
// DecideSerialInto would, and checks that an accepted fast decision is the
// general path's, valid.
func bothPaths(tb testing.TB, s *abi.SerialSnapshot, version uint32, out []byte) (fast bool, probs problems, err error) {
	tb.Helper()
	inst := &instance{reasons: map[string]string{}}
	if p := inst.v.indexSerial(s); !p.empty() {
		tb.Fatal(p.err(true))
	}
	var df, dg abi.SerialDecision
	inst.nseen = 0
	fast = inst.decideFast(out, s, version, &df)
	inst.nseen = 0
	probs, err = inst.decideGeneral(out, s, version, &dg)
	if fast {
		if err != nil || !probs.empty() {
			tb.Fatalf("fast path accepted what the general path refuses: %v %v\n%x", err, probs.err(false), out)
		}
		if fmt.Sprint(df.Actions) != fmt.Sprint(dg.Actions) || df.Below != dg.Below || df.BelowReason != dg.BelowReason {
			tb.Fatalf("fast %+v != general %+v", df, dg)
		}
	}
	return fast, probs, err
}

func TestInstance_decideFast(tt *testing.T) {
	reason := func(k abi.ActionKind) abi.Action { return abi.Action{Kind: k, Reason: "why"} }
	L, D, S := reason(abi.ActionLaunch), reason(abi.ActionDiscard), reason(abi.ActionStop)
	refs := func(below uint64, refs []uint32, acts ...abi.Action) []byte {
		return abicodec.AppendSerialDecisionRefs(nil, &abi.SerialDecision{Actions: acts, Below: below, BelowReason: "old"}, refs)
	}
	long := abicodec.AppendSerialDecisionRefs(nil, &abi.SerialDecision{Actions: []abi.Action{{Kind: abi.ActionLaunch, Reason: string(make([]byte, MaxReasonLen+1))}}}, []uint32{3})
	badKind := refs(0, []uint32{3}, L)
	binary.LittleEndian.PutUint32(badKind[16:], 9)
	var byID abi.SerialDecision
	byID.Launch("w4", "x")
	for _, c := range []struct {
		name    string
		max     uint32
		version uint32
		out     []byte
		fast    bool
	}{
		{"priority-like", 3, 3, refs(7, []uint32{6, 5, 1, 2}, L, L, S, S), true},
		{"discard-like", 3, 3, refs(0, []uint32{3, 4}, L, D), true},
		{"empty", 1, 3, refs(0, nil), true},
		{"v4-host-reads-v3", 3, 4, refs(0, []uint32{3}, L), true},
		{"from-v2", 3, 2, refs(0, []uint32{3}, L), false},
		{"by-id", 3, 3, abicodec.AppendSerialDecision(nil, &byID), false},
		{"out-of-range", 3, 3, refs(0, []uint32{7}, L), false},
		{"twice", 3, 3, refs(0, []uint32{3, 3}, L, D), false},
		{"launch-running", 3, 3, refs(0, []uint32{1}, L), false},
		{"stop-stopping", 3, 3, refs(0, []uint32{0}, S), false},
		{"stop-waiting", 3, 3, refs(0, []uint32{3}, S), false},
		{"over-max-active", 2, 3, refs(0, []uint32{3}, L), false},
		{"below-too-high", 3, 3, refs(9, nil), false},
		{"long-reason", 3, 3, long, false},
		{"unknown-kind", 3, 3, badKind, false},
		{"truncated", 3, 3, refs(0, []uint32{3}, L)[:30], false},
	} {
		tt.Run(c.name, func(tt *testing.T) {
			fast, probs, err := bothPaths(tt, fastSnapshot(c.max), c.version, c.out)
			if fast != c.fast {
				tt.Fatalf("fast path %v, want %v (general: %v %v)", fast, c.fast, err, probs.err(false))
			}
			if !c.fast && err == nil && probs.empty() && c.name != "by-id" {
				tt.Fatalf("the general path accepts it too: the case tests nothing")
			}
		})
	}
}

// FuzzDecideFast: whatever the guest's bytes, the fast path accepts only
// what the general path accepts, with the same decision.
func FuzzDecideFast(f *testing.F) {
	f.Add(uint8(3), uint8(3), abicodec.AppendSerialDecisionRefs(nil, &abi.SerialDecision{
		Actions: []abi.Action{{Kind: abi.ActionLaunch, Reason: "a"}, {Kind: abi.ActionStop, Reason: "b"}}, Below: 6, BelowReason: "c"}, []uint32{6, 1}))
	f.Add(uint8(2), uint8(3), abicodec.AppendSerialDecisionRefs(nil, &abi.SerialDecision{
		Actions: []abi.Action{{Kind: abi.ActionDiscard, Reason: "a"}, {Kind: abi.ActionLaunch, Reason: "a"}}}, []uint32{3, 4}))
	f.Add(uint8(1), uint8(2), abicodec.AppendSerialDecision(nil, &abi.SerialDecision{Actions: []abi.Action{{Kind: abi.ActionLaunch, Run: "w4"}}}))
	f.Fuzz(func(tt *testing.T, max, version uint8, out []byte) {
		bothPaths(tt, fastSnapshot(uint32(max%5)), uint32(version%5), out)
	})
}
