package policytool

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host"
)

// ScenarioResult is one scenario's verdict in `policy test`.
type ScenarioResult struct {
	Name   string   `json:"name"`
	File   string   `json:"file"`
	Pass   bool     `json:"pass"`
	Error  string   `json:"error,omitempty"`
	Diff   []string `json:"diff"`
	Actual any      `json:"actual"`
}

// TestResult is `policy test`'s result.
type TestResult struct {
	Policy    string           `json:"policy"`
	Version   string           `json:"version"`
	Kind      string           `json:"kind"`
	Passed    int              `json:"passed"`
	Failed    int              `json:"failed"`
	Scenarios []ScenarioResult `json:"scenarios"`
}

// Test runs the scenarios against pol: each passes when the decision is
// valid and its actions (a set keyed by run) or verdicts (in task order)
// are the expected ones.
func Test(ctx context.Context, sb Sandbox, pol Policy, scs []Scenario) (TestResult, error) {
	rt, err := NewRuntime(ctx, sb)
	if err != nil {
		return TestResult{}, err
	}
	defer rt.Close(context.Background())
	p, err := rt.Load(ctx, pol.Name, pol.Wasm)
	if err != nil {
		return TestResult{}, LoadError(err)
	}
	defer p.Close(context.Background())
	res := TestResult{Policy: pol.Label, Version: pol.SHA256, Kind: p.Kind().String(), Scenarios: []ScenarioResult{}}
	for _, sc := range scs {
		r := ScenarioResult{Name: sc.Name, File: filepath.ToSlash(sc.File), Diff: []string{}}
		want := abi.KindSlotReuse
		switch {
		case sc.Snap != nil:
			want = abi.KindSerial
		case sc.Alloc != nil:
			want = abi.KindAllocation
		}
		switch {
		case p.Kind() != want:
			r.Error = fmt.Sprintf("scenario is for a %s policy, the policy is %s", want, p.Kind())
		case sc.Alloc != nil:
			d, err := p.DecideAllocation(ctx, sc.Alloc)
			got := []string{}
			if err != nil {
				r.Error = strings.Join(decisionProblems(err), "; ")
			} else {
				for j, i := range d.Order {
					id := sc.Alloc.Runs[i].ID
					if j < len(d.Workers) && d.Workers[j] >= 0 {
						id += "@" + sc.Alloc.Workers[d.Workers[j]].Worker // placed (ABI version 5)
					}
					got = append(got, id)
				}
			}
			r.Actual = map[string]any{"order": got}
			if err == nil && !slices.Equal(got, sc.WantOrder) {
				r.Diff = append(r.Diff, "- order ["+strings.Join(sc.WantOrder, " ")+"]", "+ order ["+strings.Join(got, " ")+"]")
			}
		case sc.Snap != nil:
			d, err := p.DecideSerial(ctx, sc.Snap)
			r.Actual = host.Actions(d, sc.Snap.Now)
			if err != nil {
				r.Error = strings.Join(decisionProblems(err), "; ")
			}
			r.Diff = serialDiff(sc.Want, sc.WantBelow, d)
			if d.Wake != sc.WantWake {
				if sc.WantWake != 0 {
					r.Diff = append(r.Diff, "- wake at "+msRFC3339(sc.WantWake))
				}
				if d.Wake != 0 {
					r.Diff = append(r.Diff, "+ wake at "+msRFC3339(d.Wake))
				}
			}
		default:
			d, err := p.DecideReuse(ctx, sc.Req)
			vs := make([]string, 0, len(d.Verdicts))
			for _, v := range d.Verdicts {
				vs = append(vs, v.String())
			}
			r.Actual = map[string]any{"fail": d.Fail, "reason": d.Reason, "verdicts": vs}
			if err != nil {
				r.Error = strings.Join(decisionProblems(err), "; ")
			}
			if d.Fail != sc.WantReuse.Fail {
				r.Diff = append(r.Diff, fmt.Sprintf("- fail %t", sc.WantReuse.Fail), fmt.Sprintf("+ fail %t", d.Fail))
			}
			if !d.Fail && !sc.WantReuse.Fail && !slices.Equal(vs, sc.WantReuse.Verdicts) {
				r.Diff = append(r.Diff, "- verdicts ["+strings.Join(sc.WantReuse.Verdicts, " ")+"]", "+ verdicts ["+strings.Join(vs, " ")+"]")
			}
		}
		r.Pass = r.Error == "" && len(r.Diff) == 0
		if r.Pass {
			res.Passed++
		} else {
			res.Failed++
		}
		res.Scenarios = append(res.Scenarios, r)
	}
	return res, nil
}

// serialDiff compares expected and actual actions as sets keyed by run:
// "- ACTION RUN" expected but not made, "+ ACTION RUN" made but not expected.
func serialDiff(want map[string]abi.ActionKind, wantBelow uint64, d abi.SerialDecision) []string {
	got := map[string]abi.ActionKind{}
	for _, a := range d.Actions {
		got[a.Run] = a.Kind
	}
	if wantBelow != 0 || d.Below != 0 {
		want, got = maps.Clone(want), maps.Clone(got)
		if wantBelow != 0 {
			want[belowKey(wantBelow)] = abi.ActionDiscardBelow
		}
		if d.Below != 0 {
			got[belowKey(d.Below)] = abi.ActionDiscardBelow
		}
	}
	runs := make([]string, 0, len(want)+len(got))
	for r := range want {
		runs = append(runs, r)
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			runs = append(runs, r)
		}
	}
	sort.Strings(runs)
	diff := []string{}
	for _, r := range runs {
		w, wok := want[r]
		g, gok := got[r]
		if wok && gok && w == g {
			continue
		}
		if wok {
			diff = append(diff, fmt.Sprintf("- %s %s", w, r))
		}
		if gok {
			diff = append(diff, fmt.Sprintf("+ %s %s", g, r))
		}
	}
	return diff
}
