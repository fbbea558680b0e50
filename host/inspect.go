package host

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Read-only inspection of live groups, shared by the CLI (`policy dry-run
// --group`, `run explain`) and the HTTP API: a policy decides on a live
// snapshot in a runtime of the caller's, and nothing is written.

// ErrNotSerial: a dry-run of a policy that is not a serial policy.
var ErrNotSerial = errors.New("not a serial policy")

// Action is one action of a decision as users read it (JSON of dry-run,
// policy test and the API).
type Action struct {
	Action string `json:"action"`
	Run    string `json:"run"`
	Seq    uint64 `json:"seq,omitempty"` // of a discard_below: every waiting run below it
	Reason string `json:"reason,omitempty"`
}

// Key is what decision diffs compare by: the run, or the discard_below.
func (a Action) Key() string {
	if a.Action == abi.ActionDiscardBelow.String() {
		return BelowKey(a.Seq)
	}
	return a.Run
}

// BelowKey names a discard_below in diffs and expectations.
func BelowKey(seq uint64) string { return fmt.Sprintf("(waiting runs below seq %d)", seq) }

// Actions lists a serial decision's actions (a discard_below last).
func Actions(d abi.SerialDecision) []Action {
	out := make([]Action, 0, len(d.Actions)+1)
	for _, a := range d.Actions {
		out = append(out, Action{Action: a.Kind.String(), Run: a.Run, Reason: a.Reason})
	}
	if d.Below != 0 {
		out = append(out, Action{Action: abi.ActionDiscardBelow.String(), Seq: d.Below, Reason: d.BelowReason})
	}
	return out
}

// Outcome names how a decide call ended: valid, invalid (a decision that
// failed validation), timeout or trap.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "valid"
	case errors.Is(err, policies.ErrTimeout):
		return "timeout"
	case errors.Is(err, policies.ErrInvalidDecision):
		return "invalid"
	}
	return "trap"
}

// Problems splits a decide error into validation problems (the decision
// is returned but invalid) or one call error.
func Problems(err error) []string {
	var ve *policies.ValidationError
	if errors.As(err, &ve) {
		out := append([]string(nil), ve.Problems...)
		if ve.More > 0 {
			out = append(out, fmt.Sprintf("and %d more problem(s)", ve.More))
		}
		return out
	}
	return []string{err.Error()}
}

// Candidate is a policy to decide with: its wasm and how to name it.
type Candidate struct {
	Label  string // e.g. "priority v3", "wait (built-in)", a file name
	Name   string // the runtime's cache name
	SHA256 string
	Wasm   []byte
}

// CandidateFor resolves a policy name as the hosts do (ResolvePolicy):
// the active registry version, else the built-in.
func CandidateFor(ctx context.Context, st *storage.Store, name string) (Candidate, error) {
	res, err := ResolvePolicy(ctx, st, name)
	if err != nil {
		return Candidate{}, err
	}
	b, err := res.Wasm(ctx, st)
	if err != nil {
		return Candidate{}, err
	}
	label := name + " (built-in)"
	if !res.Builtin() {
		label = fmt.Sprintf("%s v%d", name, res.Registry)
	}
	return Candidate{Label: label, Name: name, SHA256: res.SHA256, Wasm: b}, nil
}

// DecisionView is what a policy decided for a snapshot, and its verdict.
type DecisionView struct {
	Policy  string   `json:"policy"`
	Version string   `json:"version"` // sha256
	Valid   bool     `json:"valid"`
	Outcome string   `json:"outcome"` // valid, invalid, timeout or trap
	Errors  []string `json:"errors"`
	Actions []Action `json:"actions"`
}

// Decide loads c in rt and has it decide snap, read-only. A load error
// (bad module) or ErrNotSerial is returned as the error; a decision that
// is invalid, traps or times out is a DecisionView with Valid false.
func Decide(ctx context.Context, rt *policies.Runtime, c Candidate, snap *abi.SerialSnapshot) (DecisionView, error) {
	out := DecisionView{Policy: c.Label, Version: c.SHA256, Errors: []string{}, Actions: []Action{}}
	p, err := rt.Load(ctx, c.Name, c.Wasm)
	if err != nil {
		return out, err
	}
	defer p.Close(context.Background())
	if p.Kind() != abi.KindSerial {
		return out, fmt.Errorf("policy %s is %s: %w", c.Label, p.Kind(), ErrNotSerial)
	}
	d, err := p.DecideSerial(ctx, snap)
	if errors.Is(err, policies.ErrInvalidSnapshot) {
		return out, err
	}
	out.Actions = Actions(d)
	out.Valid = err == nil
	out.Outcome = Outcome(err)
	if err != nil {
		out.Errors = Problems(err)
	}
	return out, nil
}

// Diff is one run on which two decisions differ.
type Diff struct {
	Run       string `json:"run"`
	Active    string `json:"active"`
	Candidate string `json:"candidate"`
}

// DiffDecisions lists the runs on which two decisions differ, sorted by run
// ("none" for no action).
func DiffDecisions(active, cand []Action) []Diff {
	a, c := map[string]string{}, map[string]string{}
	for _, x := range active {
		a[x.Key()] = x.Action
	}
	for _, x := range cand {
		c[x.Key()] = x.Action
	}
	var runs []string
	for r := range a {
		runs = append(runs, r)
	}
	for r := range c {
		if _, ok := a[r]; !ok {
			runs = append(runs, r)
		}
	}
	sort.Strings(runs)
	out := []Diff{}
	none := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	for _, r := range runs {
		if a[r] != c[r] {
			out = append(out, Diff{Run: r, Active: none(a[r]), Candidate: none(c[r])})
		}
	}
	return out
}

// DryRun is a candidate's decision on a live group beside the group's
// active policy's.
type DryRun struct {
	DecisionView
	Group  string        `json:"group,omitempty"`
	Active *DecisionView `json:"active,omitempty"`
	Diff   []Diff        `json:"diff,omitempty"`
}

// ErrUnknownGroup: the group of a dry-run or an explanation does not exist.
var ErrUnknownGroup = errors.New("unknown group")

// LiveSnapshot reads group's snapshot (one read-only script) and its
// policy's ABI form.
func LiveSnapshot(ctx context.Context, st *storage.Store, group string) (storage.Snapshot, *abi.SerialSnapshot, error) {
	sn, err := st.Snapshot(ctx, group)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && sn.Group.Policy == "") {
		return sn, nil, fmt.Errorf("group %s not found in namespace %s: %w", group, st.Namespace(), ErrUnknownGroup)
	}
	if err != nil {
		return sn, nil, err
	}
	snap, err := SerialSnapshot(sn)
	return sn, snap, err
}

// DryRunGroup has cand and the group's active policy decide on the live
// group, read-only, and diffs them.
func DryRunGroup(ctx context.Context, rt *policies.Runtime, st *storage.Store, cand Candidate, group string) (DryRun, error) {
	sn, snap, err := LiveSnapshot(ctx, st, group)
	if err != nil {
		return DryRun{}, err
	}
	active, err := CandidateFor(ctx, st, sn.Group.Policy)
	if err != nil {
		return DryRun{}, fmt.Errorf("group %s: active policy: %w", group, err)
	}
	cd, err := Decide(ctx, rt, cand, snap)
	if err != nil {
		return DryRun{}, err
	}
	ad, err := Decide(ctx, rt, active, snap)
	if err != nil {
		return DryRun{}, fmt.Errorf("group %s: active policy: %w", group, err)
	}
	return DryRun{DecisionView: cd, Group: group, Active: &ad, Diff: DiffDecisions(ad.Actions, cd.Actions)}, nil
}

// Explanation says why a run waits, or what decision moved it.
type Explanation struct {
	Run storage.Run
	// For a WAITING run:
	Waiting   bool
	Ahead     int64         // waiting runs older than it (0 = the head)
	Total     int64         // waiting runs in the group
	MaxActive int           // the group's
	Active    []storage.Run // the group's active runs
	Policy    string        // the group's policy and version
	InWindow  bool          // the policy sees the run (a deep group shows a window)
	// Now is what the group's policy decides for this run on the live
	// state, read-only: launch, discard, discard_below (covered), or none.
	Now, NowReason string
	// Why is the explanation in words.
	Why string
}

// Explain explains run id (storage.ErrNotFound if it does not exist).
func Explain(ctx context.Context, rt *policies.Runtime, st *storage.Store, id string) (Explanation, error) {
	r, err := st.GetRun(ctx, id)
	if err != nil {
		return Explanation{}, err
	}
	ex := Explanation{Run: r}
	if r.State != storage.StateWaiting {
		if d := r.Decision; d != nil {
			reason := d.Reason
			if reason == "" {
				reason = "-"
			}
			ex.Why = fmt.Sprintf("%s by decision %s (epoch %d) of %s %s at %s: %s", d.Action, d.ID, d.Epoch, d.Policy, d.PolicyVersion,
				d.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), reason)
		} else {
			reason := r.Reason
			if reason == "" {
				reason = "-"
			}
			ex.Why = fmt.Sprintf("%s; no decision of a policy moved it (%s)", r.State, reason)
		}
		return ex, nil
	}
	ahead, total, ok, err := st.QueuePosition(ctx, r.Group, id)
	if err != nil {
		return Explanation{}, err
	}
	if !ok { // it left the queue meanwhile
		return Explain(ctx, rt, st, id)
	}
	ex.Waiting, ex.Ahead, ex.Total = true, ahead, total
	sn, snap, err := LiveSnapshot(ctx, st, r.Group)
	if err != nil {
		return Explanation{}, err
	}
	ex.MaxActive = sn.Group.MaxActive
	ex.Active = sn.Active
	for _, w := range snap.Waiting {
		ex.InWindow = ex.InWindow || w.ID == id
	}
	pol, err := CandidateFor(ctx, st, sn.Group.Policy)
	if err != nil {
		ex.Why = fmt.Sprintf("waits: its group's policy %s cannot be used (%v); fix the policy or the group", sn.Group.Policy, err)
		return ex, nil
	}
	ex.Policy = pol.Label + " " + digest.Short(pol.SHA256)
	d, err := Decide(ctx, rt, pol, snap)
	if err != nil {
		return Explanation{}, err
	}
	ex.Now = "none"
	for _, a := range d.Actions {
		switch {
		case a.Run == id:
			ex.Now, ex.NowReason = a.Action, a.Reason
		case a.Action == abi.ActionDiscardBelow.String() && uint64(r.Seq) < a.Seq:
			ex.Now, ex.NowReason = a.Action, a.Reason
		}
	}
	active, maxActive := len(sn.Active), max(sn.Group.MaxActive, 1)
	switch {
	case !d.Valid:
		ex.Why = fmt.Sprintf("waits: the policy's decision is %s (%v), so the group is not decided", d.Outcome, d.Errors)
	case ex.Now == "launch":
		ex.Why = "the policy launches it now: it will start as soon as the leader decides the group (and a worker has its slots)"
	case ex.Now == "discard" || ex.Now == "discard_below":
		reason := ex.NowReason
		if reason == "" {
			reason = "-"
		}
		ex.Why = "the policy discards it on the next decision: " + reason
	case !ex.InWindow:
		ex.Why = fmt.Sprintf("waits: %d runs wait ahead of it, beyond the group's window (the policy sees the oldest and newest %d)", ahead, len(snap.Waiting)/2)
	case active >= maxActive:
		ex.Why = fmt.Sprintf("waits: the group has %d active runs of max_active %d, and %d waiting runs ahead of it", active, maxActive, ahead)
	default:
		ex.Why = fmt.Sprintf("waits: the policy does not launch it now (%d waiting runs ahead, %d active of max_active %d)", ahead, active, maxActive)
	}
	return ex, nil
}
