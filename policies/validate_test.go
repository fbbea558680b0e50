package policies

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

func TestValidateSerial(tt *testing.T) {
	W, R, L, S := t.Waiting, t.Running, t.Launched, t.Stopping
	snap := t.Snapshot("p", 1, []abi.Run{S("s1", 1), R("r2", 2), L("l3", 3)}, []abi.Run{W("w4", 4), W("w5", 5)})
	act := func(k abi.ActionKind, run string) abi.Action { return abi.Action{Kind: k, Run: run, Reason: "x"} }
	cases := []struct {
		name  string
		acts  []abi.Action
		want  []string // substrings of problems; none = valid
		below uint64
	}{
		{"empty", nil, nil, 0},
		{"priority-like", []abi.Action{act(abi.ActionDiscard, "w4"), act(abi.ActionLaunch, "w5"), act(abi.ActionStop, "r2"), act(abi.ActionStop, "l3")}, nil, 0},
		{"unknown run", []abi.Action{act(abi.ActionDiscard, "nope")}, []string{`discard "nope": unknown run`}, 0},
		{"two actions", []abi.Action{act(abi.ActionDiscard, "w4"), act(abi.ActionDiscard, "w4")}, []string{"already has action 0"}, 0},
		{"launch active", []abi.Action{act(abi.ActionLaunch, "r2")}, []string{"RUNNING, not WAITING"}, 0},
		{"discard active", []abi.Action{act(abi.ActionDiscard, "l3")}, []string{"LAUNCHED, not WAITING"}, 0},
		{"stop waiting", []abi.Action{act(abi.ActionStop, "w4")}, []string{"WAITING, not LAUNCHED or RUNNING"}, 0},
		{"stop stopping", []abi.Action{act(abi.ActionStop, "s1")}, []string{"STOPPING, not LAUNCHED or RUNNING"}, 0},
		{"unknown kind", []abi.Action{act(9, "w4")}, []string{"unknown action kind 9"}, 0},
		{"over max_active", []abi.Action{act(abi.ActionLaunch, "w4")}, []string{"exceeds max_active 1"}, 0},
		{"long reason", []abi.Action{{Kind: abi.ActionDiscard, Run: "w4", Reason: strings.Repeat("x", 300)}}, []string{"reason of 300 bytes"}, 0},
		{"discard_below all", nil, nil, 6},
		{"discard_below beside a launch", []abi.Action{act(abi.ActionLaunch, "w4"), act(abi.ActionStop, "r2"), act(abi.ActionStop, "l3")}, nil, 6},
		{"discard_below beyond the newest", nil, []string{"discard_below 7: above the newest waiting run's seq 5 plus 1"}, 7},
	}
	for _, c := range cases {
		tt.Run(c.name, func(tt *testing.T) {
			err := ValidateSerial(snap, &abi.SerialDecision{Actions: c.acts, Below: c.below, BelowReason: "old"})
			if len(c.want) == 0 {
				if err != nil {
					tt.Fatal(err)
				}
				return
			}
			var ve *ValidationError
			if !errors.Is(err, ErrInvalidDecision) || !errors.As(err, &ve) {
				tt.Fatalf("err = %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					tt.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// TestValidateSerial_discardBelowNeedsWaiting: a discard_below on a snapshot
// without waiting runs, or with a reason over MaxReasonLen, is invalid.
func TestValidateSerial_discardBelowNeedsWaiting(tt *testing.T) {
	s := t.Snapshot("p", 1, []abi.Run{t.Running("r1", 1)}, nil)
	err := ValidateSerial(s, &abi.SerialDecision{Below: 1})
	if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), "no waiting runs") {
		tt.Fatalf("err = %v", err)
	}
	s.Waiting = []abi.Run{t.Waiting("w2", 2)}
	err = ValidateSerial(s, &abi.SerialDecision{Below: 3, BelowReason: strings.Repeat("y", 257)})
	if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), "discard_below: reason of 257 bytes") {
		tt.Fatalf("err = %v", err)
	}
}

func TestValidateSerialBadSnapshot(tt *testing.T) {
	s := t.Snapshot("p", 1, []abi.Run{t.Waiting("a", 1)}, []abi.Run{t.Waiting("b", 3), t.Waiting("b", 2)})
	err := ValidateSerial(s, &abi.SerialDecision{})
	if !errors.Is(err, ErrInvalidSnapshot) || errors.Is(err, ErrInvalidDecision) {
		tt.Fatalf("err = %v", err)
	}
	for _, w := range []string{"state WAITING not allowed", `duplicate run id "b"`, "not above the previous"} {
		if !strings.Contains(err.Error(), w) {
			tt.Errorf("%q lacks %q", err, w)
		}
	}
}

func TestValidateReuse(tt *testing.T) {
	r := t.Reuse(t.Slot(0, "w1", true, true), t.Slot(1, "w2", true, false))
	ok := []*abi.ReuseDecision{
		{Verdicts: []abi.Verdict{abi.VerdictReuse, abi.VerdictReallocate}},
		{Verdicts: []abi.Verdict{abi.VerdictReallocate, abi.VerdictReallocate}},
		{Fail: true, Reason: "give up"},
	}
	for _, d := range ok {
		if err := validateReuse(r, d); err != nil {
			tt.Fatalf("%+v: %v", d, err)
		}
	}
	bad := map[string]*abi.ReuseDecision{
		"not verified":            {Verdicts: []abi.Verdict{abi.VerdictReuse, abi.VerdictReuse}},
		"1 verdicts for 2":        {Verdicts: []abi.Verdict{abi.VerdictReuse}},
		"unknown verdict 7":       {Verdicts: []abi.Verdict{abi.VerdictReuse, 7}},
		"3 verdicts for 2 task s": {Verdicts: []abi.Verdict{1, 2, 2}},
	}
	for want, d := range bad {
		err := validateReuse(r, d)
		if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), want) {
			tt.Errorf("%+v: err = %v, want %q", d, err, want)
		}
	}
}

func TestConfigValidate(tt *testing.T) {
	for _, c := range []Config{{MemoryLimit: 1 << 20}, {CallTimeout: -1}, {PoolSize: -1}, {StderrLimit: -1}, {MemoryLimit: 8 << 30}} {
		if c.Validate() == nil {
			tt.Errorf("%+v accepted", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		tt.Fatal(err)
	}
}

// TestValidator_index: the run-id index finds every run and every
// duplicate on both of its hash paths (ids of 8 to 16 bytes mixed inline,
// others through maphash), also for ids that differ in one middle byte or
// only in length, and for a duplicate across the active and waiting lists.
func TestValidator_index(tt *testing.T) {
	for _, c := range []struct {
		name string
		id   func(i int) string
	}{
		{"inline-10", func(i int) string { return fmt.Sprintf("run-%06d", i) }},
		{"inline-16-middle", func(i int) string { return fmt.Sprintf("aaaaaa%04dbbbbbb", i) }},
		{"inline-lengths", func(i int) string { return strings.Repeat("x", 8+i%9) + fmt.Sprint(i/9) }},
		{"short", func(i int) string { return fmt.Sprint(i) }},
		{"long", func(i int) string { return fmt.Sprintf("%040d", i) }},
	} {
		tt.Run(c.name, func(tt *testing.T) {
			const n = 2000
			var v validator
			active := []abi.Run{t.Running(c.id(0), 1)}
			waiting := make([]abi.Run, 0, n)
			for i := 1; i < n; i++ {
				waiting = append(waiting, t.Waiting(c.id(i), uint64(i+1)))
			}
			s := t.Snapshot("p", 1, active, waiting)
			if probs := v.indexSerial(s); !probs.empty() {
				tt.Fatalf("distinct ids: %v", probs.err(true))
			}
			// DecideSerialInto sizes the guest's input from v.idBytes
			if got := abicodec.SerialSnapshotHeaderSize + n*abicodec.RunSize + len(s.Group) + len(s.Policy) + v.idBytes; got != abicodec.SerialSnapshotSize(s) {
				tt.Fatalf("size from idBytes %d, abicodec.SerialSnapshotSize %d", got, abicodec.SerialSnapshotSize(s))
			}
			for i := range n {
				if j, ok := v.lookup(s, c.id(i)); !ok || j != i {
					tt.Fatalf("lookup %q = %d, %v; want %d", c.id(i), j, ok, i)
				}
			}
			if _, ok := v.lookup(s, c.id(n)); ok {
				tt.Fatalf("lookup of an id not in the snapshot found one")
			}
			// a waiting run with the active run's id, and one twice in waiting
			waiting[7].ID, waiting[n-2].ID = c.id(0), c.id(5)
			err := ValidateSerial(s, &abi.SerialDecision{})
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), "waiting[7]: duplicate run id") ||
				!strings.Contains(err.Error(), fmt.Sprintf("waiting[%d]: duplicate run id", n-2)) {
				tt.Fatalf("duplicates: %v", err)
			}
		})
	}
}
