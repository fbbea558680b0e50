// Package cases is the one table of decisions the default plugins must make.
// The native tests of each plugin (plugins/<name>) and the wasm tests through
// the host runtime (plugins/builtin_test.go) run the same table, so native and
// wasm results are compared against the same expectations.
package cases

import (
	"fmt"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
	t "github.com/wasmsched/wasmsched/abi/abitest"
)

// Serial is one serial case: Want lists "kind:run" in decision order.
type Serial struct {
	Name string
	Snap *abi.SerialSnapshot
	Want []string
}

// Reuse is one slot-reuse case: Want lists verdicts, or "fail".
type Reuse struct {
	Name string
	Req  *abi.ReuseRequest
	Want []string
}

type runs = []abi.Run

// SerialCases returns the table for the serial policy name (wait, discard,
// priority).
func SerialCases(policy string) []Serial {
	s := func(max uint32, a, w runs) *abi.SerialSnapshot { return t.Snapshot(policy, max, a, w) }
	W, R, L, S := t.Waiting, t.Running, t.Launched, t.Stopping
	// deep: a window of a group with 100,000 waiting runs (seqs 11 to
	// 100,010): the oldest two and the newest two (ABI v2)
	deep := func(max uint32, a runs) *abi.SerialSnapshot {
		return t.Window(s(max, a, runs{W("r11", 11), W("r12", 12), W("r100009", 100_009), W("r100010", 100_010)}), 100_000, 2)
	}
	switch policy {
	case "wait":
		return []Serial{
			{"empty", s(1, nil, nil), nil},
			{"ds/active-run-waits", s(1, runs{R("r1", 1)}, runs{W("r2", 2), W("r3", 3)}), nil},
			{"ds/launch-head", s(1, nil, runs{W("r1", 1), W("r2", 2)}), []string{"launch:r1"}},
			{"max2/one-active", s(2, runs{R("r1", 1)}, runs{W("r2", 2), W("r3", 3)}), []string{"launch:r2"}},
			{"max2/none-active", s(2, nil, runs{W("r1", 1), W("r2", 2), W("r3", 3)}), []string{"launch:r1", "launch:r2"}},
			{"max0-reads-as-1", s(0, nil, runs{W("r1", 1), W("r2", 2)}), []string{"launch:r1"}},
			{"stopping-still-occupies", s(1, runs{S("r1", 1)}, runs{W("r2", 2)}), nil},
			{"max3/full", s(3, runs{R("r1", 1), L("r2", 2), R("r3", 3)}, runs{W("r4", 4)}), nil},
			{"deep/launch-oldest", deep(1, nil), []string{"launch:r11"}},
			{"deep/max2-one-active", deep(2, runs{R("r1", 1)}), []string{"launch:r11"}},
			{"deep/full", deep(1, runs{R("r1", 1)}), nil},
		}
	case "discard":
		return []Serial{
			{"empty", s(1, nil, nil), nil},
			{"ds/launch-head-discard-rest", s(1, nil, runs{W("r1", 1), W("r2", 2), W("r3", 3)}),
				[]string{"launch:r1", "discard:r2", "discard:r3"}},
			{"ds/never-touch-running", s(1, runs{R("r1", 1)}, runs{W("r2", 2), W("r3", 3)}),
				[]string{"discard:r2", "discard:r3"}},
			{"max2/one-active", s(2, runs{R("r1", 1)}, runs{W("r2", 2), W("r3", 3), W("r4", 4)}),
				[]string{"launch:r2", "discard:r3", "discard:r4"}},
			{"max2/single-waiting", s(2, nil, runs{W("r1", 1)}), []string{"launch:r1"}},
			{"only-active", s(1, runs{L("r1", 1)}, nil), nil},
			{"deep/launch-head-discard-rest", deep(1, nil), []string{"launch:r11", "discard_below:100011"}},
			{"deep/busy", deep(1, runs{R("r1", 1)}), []string{"discard_below:100011"}},
			{"deep/max2-none-active", deep(2, nil), []string{"launch:r11", "launch:r12", "discard_below:100011"}},
		}
	case "priority":
		return []Serial{
			{"empty", s(1, nil, nil), nil},
			{"ds/newest-wins", s(1, runs{R("r1", 1)}, runs{W("r2", 2), W("r3", 3)}),
				[]string{"discard:r2", "launch:r3", "stop:r1"}},
			{"only-active", s(1, runs{R("r1", 1)}, nil), nil},
			{"no-active", s(1, nil, runs{W("r1", 1), W("r2", 2), W("r3", 3)}),
				[]string{"discard:r1", "discard:r2", "launch:r3"}},
			{"max2/replace-both", s(2, runs{L("r1", 1), R("r2", 2)}, runs{W("r3", 3), W("r4", 4)}),
				[]string{"launch:r3", "launch:r4", "stop:r1", "stop:r2"}},
			{"max2/keep-one", s(2, runs{R("r1", 1)}, runs{W("r2", 2), W("r3", 3), W("r4", 4)}),
				[]string{"discard:r2", "launch:r3", "launch:r4", "stop:r1"}},
			{"max2/fits", s(2, runs{R("r3", 3)}, runs{W("r4", 4)}), []string{"launch:r4"}},
			{"stopping-untouched", s(1, runs{S("r1", 1), R("r2", 2)}, runs{W("r3", 3)}),
				[]string{"launch:r3", "stop:r2"}},
			{"deep/newest-wins", deep(1, runs{R("r1", 1)}), []string{"launch:r100010", "discard_below:100010", "stop:r1"}},
			{"deep/max2", deep(2, runs{S("r1", 1), R("r2", 2)}),
				[]string{"launch:r100009", "launch:r100010", "discard_below:100009", "stop:r2"}},
		}
	}
	panic("cases: no serial table for " + policy)
}

// ReuseCases returns the table for the reuse policy.
func ReuseCases() []Reuse {
	sl := t.Slot
	return []Reuse{
		{"all-verified", t.Reuse(sl(0, "w1", true, true), sl(1, "w2", true, true)), []string{"reuse", "reuse"}},
		{"mixed", t.Reuse(sl(0, "w1", true, true), sl(1, "w2", true, false), sl(2, "w3", false, true), sl(3, "w4", false, false)),
			[]string{"reuse", "reallocate", "reallocate", "reallocate"}},
		{"none-verified", t.Reuse(sl(0, "w1", false, false)), []string{"reallocate"}},
		{"no-slots", t.Reuse(), nil},
	}
}

// FormatSerial renders a decision as the table's "kind:run" list.
func FormatSerial(d abi.SerialDecision) []string {
	var out []string
	for _, a := range d.Actions {
		out = append(out, a.Kind.String()+":"+a.Run)
	}
	if d.Below != 0 {
		// after the launches, before the stops: where the table lists it
		at := len(out)
		for at > 0 && d.Actions[at-1].Kind == abi.ActionStop {
			at--
		}
		out = append(out[:at], append([]string{fmt.Sprintf("discard_below:%d", d.Below)}, out[at:]...)...)
	}
	return out
}

// FormatReuse renders a reuse decision as the table's list.
func FormatReuse(d abi.ReuseDecision) []string {
	if d.Fail {
		return []string{"fail"}
	}
	var out []string
	for _, v := range d.Verdicts {
		out = append(out, v.String())
	}
	return out
}

// Equal compares two rendered lists.
func Equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// Diff describes a mismatch.
func Diff(got, want []string) string { return fmt.Sprintf("got %q, want %q", got, want) }
