package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host/internal/engine"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Read-only inspection of a live namespace, shared by the CLI (`run
// explain`, `policy dry-run`, `policy list`) and the HTTP API: a policy
// decides on a live snapshot in a wasm runtime of the caller's, and nothing
// is written. The answers are client records.

// Inspector decides read-only with policies it keeps loaded between calls
// (by sha256, at most maxInspectorPolicies), so a long-lived caller (the
// HTTP API) pays a module's compile and instantiation once, not per
// request. Safe for concurrent use; Close it when done.
type Inspector struct {
	rt *policies.Runtime

	mu     sync.Mutex
	loaded map[string]*inspected // name@sha256
	tick   int64
}

type inspected struct {
	p    *policies.Policy
	used int64 // Inspector.tick at the last use
	busy int   // calls deciding with it now
}

// maxInspectorPolicies bounds the modules an Inspector keeps loaded; the
// least recently used one that no call is using is closed to make room.
const maxInspectorPolicies = 8

// NewInspector decides in rt (which the caller closes after the Inspector).
func NewInspector(rt *policies.Runtime) *Inspector {
	return &Inspector{rt: rt, loaded: map[string]*inspected{}}
}

// Close closes the modules the Inspector loaded.
func (in *Inspector) Close(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	var err error
	for k, e := range in.loaded {
		err = errors.Join(err, e.p.Close(ctx))
		delete(in.loaded, k)
	}
	return err
}

// acquire returns m loaded, loading it if needed; release it with done.
func (in *Inspector) acquire(ctx context.Context, m Module) (*policies.Policy, func(), error) {
	key := m.Name + "@" + m.SHA256
	in.mu.Lock()
	in.tick++
	if e, ok := in.loaded[key]; ok {
		e.busy++
		e.used = in.tick
		in.mu.Unlock()
		return e.p, in.release(e), nil
	}
	in.mu.Unlock()
	p, err := in.rt.Load(ctx, m.Name, m.Wasm)
	if err != nil {
		return nil, nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if e, ok := in.loaded[key]; ok { // loaded meanwhile by another call
		_ = p.Close(context.Background())
		e.busy++
		return e.p, in.release(e), nil
	}
	for len(in.loaded) >= maxInspectorPolicies {
		var lru string
		for k, e := range in.loaded {
			if e.busy == 0 && (lru == "" || e.used < in.loaded[lru].used) {
				lru = k
			}
		}
		if lru == "" {
			break // every one is in use: go over the bound until they end
		}
		_ = in.loaded[lru].p.Close(context.Background())
		delete(in.loaded, lru)
	}
	e := &inspected{p: p, used: in.tick, busy: 1}
	in.loaded[key] = e
	return p, in.release(e), nil
}

func (in *Inspector) release(e *inspected) func() {
	return func() {
		in.mu.Lock()
		e.busy--
		in.mu.Unlock()
	}
}

var (
	// ErrUnknownPolicy: a name that is neither pushed and active nor a built-in.
	ErrUnknownPolicy = engine.ErrUnknownPolicy
	// ErrUnknownGroup: the group of a dry-run or an explanation does not exist.
	ErrUnknownGroup = errors.New("unknown group")
	// ErrNotSerial: a dry-run of a policy that is not a serial policy.
	ErrNotSerial = errors.New("not a serial policy")
)

// Module is a policy module to decide with: how to name it and its bytes.
type Module struct {
	Name     string // the policy name (the runtime's cache name)
	Label    string // e.g. "priority v3", "wait (built-in)", a file name
	Registry int    // the registry version; 0 = a built-in or a file
	SHA256   string
	Wasm     []byte
}

// ResolvePolicy resolves name as the hosts do: its active pushed version in
// st's namespace, else the built-in of that name (st nil: built-ins only).
// ErrUnknownPolicy (wrapped, with what to do) for anything else.
func ResolvePolicy(ctx context.Context, st *storage.Store, name string) (Module, error) {
	res, err := engine.ResolvePolicy(ctx, st, name)
	if err != nil {
		return Module{}, err
	}
	b, err := res.Wasm(ctx, st)
	if err != nil {
		return Module{}, err
	}
	label := name + " (built-in)"
	if !res.Builtin() {
		label = fmt.Sprintf("%s v%d", name, res.Registry)
	}
	return Module{Name: name, Label: label, Registry: res.Registry, SHA256: res.SHA256, Wasm: b}, nil
}

// Decide has m decide snap, read-only. A load error (bad module) or
// ErrNotSerial is returned as the error; a decision that is invalid, traps
// or times out is a PolicyDecision with Valid false.
func (in *Inspector) Decide(ctx context.Context, m Module, snap *abi.SerialSnapshot) (client.PolicyDecision, error) {
	out := client.PolicyDecision{Policy: m.Label, Version: m.SHA256, Errors: []string{}, Actions: []client.Action{}}
	p, done, err := in.acquire(ctx, m)
	if err != nil {
		return out, err
	}
	defer done()
	if p.Kind() != abi.KindSerial {
		return out, fmt.Errorf("policy %s is %s: %w", m.Label, p.Kind(), ErrNotSerial)
	}
	d, err := p.DecideSerial(ctx, snap)
	if errors.Is(err, policies.ErrInvalidSnapshot) {
		return out, err
	}
	out.Actions = Actions(d, snap.Now)
	out.Valid = err == nil
	out.Outcome = outcome(err)
	if err != nil {
		out.Errors = policies.Problems(err)
	}
	return out, nil
}

// BoundedWake is the wake the host keeps for a decision made at now (unix
// ms) that asked for wake: wake held to now+abi.MinWakeInterval ..
// now+abi.MaxWakeAhead (the apply does the same with the Redis clock); 0
// for no wake. Everything that shows a policy's wake shows this one.
func BoundedWake(wake, now int64) int64 {
	if wake == 0 {
		return 0
	}
	return min(max(wake, now+abi.MinWakeInterval), now+abi.MaxWakeAhead)
}

// Actions lists a serial decision's actions as records (a discard_below
// last, then a wake: the one the host would keep for a decision at now,
// unix ms, BoundedWake, with the policy's ask beside it when moved).
func Actions(d abi.SerialDecision, now int64) []client.Action {
	out := make([]client.Action, 0, len(d.Actions)+1)
	for _, a := range d.Actions {
		out = append(out, client.Action{Action: a.Kind.String(), Run: a.Run, Reason: a.Reason})
	}
	if d.Below != 0 {
		out = append(out, client.Action{Action: abi.ActionDiscardBelow.String(), Seq: d.Below, Reason: d.BelowReason})
	}
	if d.Wake != 0 {
		bounded := BoundedWake(d.Wake, now)
		at := time.UnixMilli(bounded).UTC()
		a := client.Action{Action: abi.ActionWake.String(), At: &at}
		if bounded != d.Wake {
			a.AskedMS = d.Wake
		}
		out = append(out, a)
	}
	return out
}

// outcome names how a decide call ended: valid, invalid, timeout or trap.
func outcome(err error) string {
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

// diffDecisions lists the runs on which two decisions differ, sorted by run.
func diffDecisions(active, cand []client.Action) []client.ActionDiff {
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
	out := []client.ActionDiff{}
	none := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	for _, r := range runs {
		if a[r] != c[r] {
			out = append(out, client.ActionDiff{Run: r, Active: none(a[r]), Candidate: none(c[r])})
		}
	}
	return out
}

// LiveSnapshot reads group's snapshot (one read-only script) in the ABI
// form its policy is given.
func LiveSnapshot(ctx context.Context, st *storage.Store, group string) (*abi.SerialSnapshot, error) {
	_, snap, err := liveSnapshot(ctx, st, group)
	return snap, err
}

func liveSnapshot(ctx context.Context, st *storage.Store, group string) (storage.Snapshot, *abi.SerialSnapshot, error) {
	sn, err := st.Snapshot(ctx, group)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && sn.Group.Policy == "") {
		return sn, nil, fmt.Errorf("group %s not found in namespace %s: %w", group, st.Namespace(), ErrUnknownGroup)
	}
	if err != nil {
		return sn, nil, err
	}
	snap, err := engine.SerialSnapshot(sn)
	return sn, snap, err
}

// DryRun has m and the group's own policy decide on the live group,
// read-only, and diffs them.
func (in *Inspector) DryRun(ctx context.Context, st *storage.Store, m Module, group string) (client.DryRun, error) {
	sn, snap, err := liveSnapshot(ctx, st, group)
	if err != nil {
		return client.DryRun{}, err
	}
	active, err := ResolvePolicy(ctx, st, sn.Group.Policy)
	if err != nil {
		return client.DryRun{}, fmt.Errorf("group %s: its policy: %w", group, err)
	}
	cd, err := in.Decide(ctx, m, snap)
	if err != nil {
		return client.DryRun{}, err
	}
	ad, err := in.Decide(ctx, active, snap)
	if err != nil {
		return client.DryRun{}, fmt.Errorf("group %s: its policy: %w", group, err)
	}
	return client.DryRun{PolicyDecision: cd, Group: group, Active: &ad, Diff: diffDecisions(ad.Actions, cd.Actions)}, nil
}

// Policies lists the namespace's policies: the registry's, then every
// built-in that was never pushed, by name.
func Policies(ctx context.Context, st *storage.Store) ([]client.Policy, error) {
	c, err := client.NewFromRedis(st.Redis(), st.Namespace())
	if err != nil {
		return nil, err
	}
	ps, err := c.Policies(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range ps {
		_, ps[i].Builtin = plugins.Lookup(ps[i].Name)
		seen[ps[i].Name] = true
	}
	for _, b := range plugins.All() {
		if !seen[b.Name] {
			ps = append(ps, client.Policy{Name: b.Name, Kind: b.Kind.String(), Builtin: true,
				Versions: []client.PolicyVersion{}, History: []client.PolicyEvent{}})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps, nil
}

// Explain explains run id: why it waits (its place, the group's active
// runs, what its policy decides now on the live state) or which decision
// moved it. storage.ErrNotFound if the run does not exist.
func (in *Inspector) Explain(ctx context.Context, st *storage.Store, id string) (client.Explanation, error) {
	c, err := client.NewFromRedis(st.Redis(), st.Namespace())
	if err != nil {
		return client.Explanation{}, err
	}
	for range 3 { // a run that leaves the queue while we look is explained again
		ex, again, err := in.explain(ctx, st, c, id)
		if !again {
			return ex, err
		}
	}
	return explainMoved(ctx, c, id)
}

func explainMoved(ctx context.Context, c *client.Client, id string) (client.Explanation, error) {
	r, err := c.Get(ctx, id)
	if err != nil {
		return client.Explanation{}, err
	}
	return client.Explanation{Run: r, Why: movedWhy(r)}, nil
}

// movedWhy says what moved a run that no longer waits.
func movedWhy(r client.Run) string {
	if d := r.Decision; d != nil {
		reason := d.Reason
		if reason == "" {
			reason = "-"
		}
		return fmt.Sprintf("%s by decision %s (epoch %d) of %s %s at %s: %s", d.Action, d.ID, d.Epoch, d.Policy, d.PolicyVersion,
			d.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), reason)
	}
	reason := r.Reason
	if reason == "" {
		reason = "-"
	}
	return fmt.Sprintf("%s; no decision of a policy moved it (%s)", r.State, reason)
}

func (in *Inspector) explain(ctx context.Context, st *storage.Store, c *client.Client, id string) (ex client.Explanation, again bool, err error) {
	r, err := c.Get(ctx, id)
	if err != nil {
		return ex, false, err
	}
	ex.Run = r
	if r.State == string(storage.StateLaunched) {
		ex.Why, err = in.launchedWhy(ctx, st, r)
		return ex, false, err
	}
	if r.State != string(storage.StateWaiting) {
		ex.Why = movedWhy(r)
		return ex, false, nil
	}
	ahead, total, ok, err := st.QueuePosition(ctx, r.Group, id)
	if err != nil {
		return ex, false, err
	}
	if !ok && r.NotBefore != nil && r.Reason != "" && r.Attempt > 1 {
		ex.Why = fmt.Sprintf("attempt %d of %d, retry due at %s (%s); %s", r.Attempt, r.MaxAttempts, fmtTime(*r.NotBefore), untilText(*r.NotBefore), r.Reason)
		return ex, false, nil
	}
	if !ok && r.NotBefore != nil {
		ex.Why = fmt.Sprintf("not due until %s (%s): it joins the group's queue then", fmtTime(*r.NotBefore), untilText(*r.NotBefore))
		return ex, false, nil
	}
	if !ok { // it left the queue meanwhile
		return ex, true, nil
	}
	ex.Ahead, ex.Place, ex.Waiting = int(ahead), int(ahead)+1, int(total)
	sn, snap, err := liveSnapshot(ctx, st, r.Group)
	if err != nil {
		return ex, false, err
	}
	ex.MaxActive = sn.Group.MaxActive
	if sn.Group.Paused {
		g, err := st.GetGroup(ctx, r.Group)
		if err != nil {
			return ex, false, err
		}
		ex.Why = fmt.Sprintf("waits: its group %s is paused (since %s by %s): nothing launches until group resume %s",
			r.Group, fmtTime(g.PausedAt), g.PausedBy, r.Group)
		return ex, false, nil
	}
	ids := make([]string, 0, len(sn.Active))
	for _, a := range sn.Active {
		ids = append(ids, a.ID)
	}
	if ex.Active, err = c.GetRuns(ctx, ids); err != nil {
		return ex, false, err
	}
	for _, w := range snap.Waiting {
		ex.InWindow = ex.InWindow || w.ID == id
	}
	pol, err := ResolvePolicy(ctx, st, sn.Group.Policy)
	if err != nil {
		ex.Why = fmt.Sprintf("waits: its group's policy %s cannot be used (%v); fix the policy or the group", sn.Group.Policy, err)
		return ex, false, nil
	}
	ex.Policy = pol.Label + " " + digest.Short(pol.SHA256)
	d, err := in.Decide(ctx, pol, snap)
	if err != nil {
		return ex, false, err
	}
	waitingWhy(&ex, d, r, len(sn.Active), max(sn.Group.MaxActive, 1), len(snap.Waiting), ahead)
	return ex, false, nil
}

// launchedWhy says why a LAUNCHED run has no slots yet.
func (in *Inspector) launchedWhy(ctx context.Context, st *storage.Store, r client.Run) (string, error) {
	why := movedWhy(r)
	ahead, free, ok, err := st.SlotQueuePosition(ctx, r.ID)
	if err != nil || !ok {
		return why, err
	}
	as, err := ReadAllocationStatus(ctx, st, "")
	if err != nil {
		return why, err
	}
	if pw, err := placementWhy(ctx, st, r); err != nil || pw != "" {
		return pw + why, err
	}
	return fmt.Sprintf("launched, waiting for slots: it needs %d slot(s), %d free; %d launched run(s) ahead of it in launch order. %s%s "+
		"A run that fits may take slots past one that does not until that one has waited the leader's slot guard (serve --slot-guard, default %v); "+
		"then the slots that free up are held for it. %s",
		r.Slots, free, ahead, allocationWhy(as, r), in.leftOut(ctx, st, as, r.ID), DefaultSlotGuard, why), nil
}

// waitingWhy fills what the policy's decision d on the group's snapshot
// (active runs of maxActive, a window of window waiting runs) says of the
// WAITING run r, ahead of which ahead runs wait.
func waitingWhy(ex *client.Explanation, d client.PolicyDecision, r client.Run, active, maxActive, window int, ahead int64) {
	var wake *time.Time
	for _, a := range d.Actions {
		switch {
		case a.Action == abi.ActionWake.String():
			wake = a.At
		case a.Run == r.ID:
			ex.Now, ex.NowReason = a.Action, a.Reason
		case a.Action == abi.ActionDiscardBelow.String() && uint64(r.Seq) < a.Seq:
			ex.Now, ex.NowReason = a.Action, a.Reason
		}
	}
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
	case wake != nil:
		ex.WakeAt = wake
		ex.Why = fmt.Sprintf("waits: the policy asked to be woken at %s (%s): it decides the group again then, or at the next change",
			fmtTime(*wake), untilText(*wake))
	case !ex.InWindow:
		ex.Why = fmt.Sprintf("waits: %d runs wait ahead of it, beyond the group's window (the policy sees the oldest and newest %d)", ahead, window/2)
	case active >= maxActive:
		ex.Why = fmt.Sprintf("waits: the group has %d active runs of max_active %d, and %d waiting runs ahead of it", active, maxActive, ahead)
	default:
		ex.Why = fmt.Sprintf("waits: the policy does not launch it now (%d waiting runs ahead, %d active of max_active %d)", ahead, active, maxActive)
	}
}

// leftOut says, with a leading space, what the namespace's allocation
// policy (a pushed one, or a built-in other than fifo) does with run id on
// the live allocation snapshot when it does not order it: it leaves the run
// out, or its order is invalid (the leader then uses its fallback). ""
// when the policy orders the run, the run is beyond the snapshot's window,
// or the policy cannot be run here.
func (in *Inspector) leftOut(ctx context.Context, st *storage.Store, as AllocationStatus, id string) string {
	name := as.Settings.PolicyName()
	if name == limits.DefaultAllocation {
		if _, err := st.GetPolicy(ctx, name); errors.Is(err, storage.ErrNotFound) {
			return "" // the built-in fifo: launch order, which leaves no run out
		}
	}
	snap, _, err := AllocationSnapshot(ctx, st)
	if err != nil || !slices.ContainsFunc(snap.Runs, func(r abi.AllocRun) bool { return r.ID == id }) {
		return ""
	}
	m, err := ResolvePolicy(ctx, st, name)
	if err != nil {
		return ""
	}
	o, err := in.DecideAllocation(ctx, m, snap)
	switch {
	case err != nil:
		return ""
	case !o.Valid:
		return fmt.Sprintf(" The allocation policy %s's order is %s now (%s): the leader orders the launched runs with its fallback (the last version that decided well, else launch order).",
			m.Label, o.Outcome, strings.Join(o.Errors, "; "))
	case slices.Contains(o.Order, id):
		return ""
	}
	return fmt.Sprintf(" The allocation policy %s leaves this run out of its order now: it waits until the policy orders it "+
		"(an order that places nothing while runs fit the free slots counts as a policy failure after %d passes in a row: the leader then uses its fallback).",
		m.Label, MaxIdleAllocationPasses)
}

// allocationWhy says how the namespace's allocation policy orders r.
func allocationWhy(as AllocationStatus, r client.Run) string {
	set := as.Settings
	switch set.PolicyName() {
	case "fifo":
		return "Allocation policy fifo: slots go in launch order."
	case "priority-first":
		return fmt.Sprintf("Allocation policy priority-first: the highest priority first (this run's is %d), the oldest among equals.", r.Priority)
	case "fair":
		key, value, what := "", r.Group, "group "+r.Group
		if set.FairLabel != "" {
			key, value = set.FairLabel, r.Labels[set.FairLabel]
			what = fmt.Sprintf("%s %s", set.FairLabel, value)
			if value == "" {
				what = "runs without label " + set.FairLabel
			}
		}
		used := 0
		for _, u := range as.Usage {
			if u.Key == key && u.Value == value {
				used = int(u.Slots)
			}
		}
		pct := 0
		if as.Slots > 0 {
			pct = 100 * used / as.Slots
		}
		return fmt.Sprintf("Allocation policy fair: %s (this run's) uses %d%% of the slots (%d of %d) at weight %d; "+
			"the next free slot goes to the value using the least per unit of weight.", what, pct, used, as.Slots, set.Weight(value))
	}
	return fmt.Sprintf("Allocation policy %s (pushed) orders the launched runs.", set.PolicyName())
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// untilText is "in 4m0s" for a time ahead, "due now" for one passed (the
// leader moves it at once).
func untilText(t time.Time) string {
	if d := time.Until(t); d > 0 {
		return "in " + d.Round(time.Second).String()
	}
	return "due now"
}

// aKind is a policy kind with its article: "a serial", "an allocation".
func aKind(kind string) string {
	if strings.IndexAny(kind, "aeiou") == 0 {
		return "an " + kind
	}
	return "a " + kind
}

// serialBuiltins names the serial built-ins.
func serialBuiltins() []string {
	var out []string
	for _, p := range plugins.All() {
		if p.Kind == abi.KindSerial {
			out = append(out, p.Name)
		}
	}
	return out
}

// CheckGroupPolicy reports whether name can decide a group in st's
// namespace now: a serial built-in, or a pushed serial policy with an
// active version. The CLI (`group set --policy`) and the HTTP API refuse
// the same names with this message; the error wraps ErrUnknownPolicy or
// ErrNotSerial.
func CheckGroupPolicy(ctx context.Context, st *storage.Store, name string) error {
	if bp, ok := plugins.Lookup(name); ok {
		if k := bp.Kind; k != abi.KindSerial {
			return fmt.Errorf("policy %s is %s policy; a group needs a serial one (wait, discard, priority, or a pushed serial policy): %w", name, aKind(k.String()), ErrNotSerial)
		}
		return nil
	}
	p, err := st.GetPolicy(ctx, name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("policy %s is neither a serial built-in (%s) nor pushed in namespace %s (wasmsched policy push %s FILE): %w",
			name, strings.Join(serialBuiltins(), ", "), st.Namespace(), name, ErrUnknownPolicy)
	case err != nil:
		return err
	case p.Kind != abi.KindSerial.String():
		return fmt.Errorf("policy %s is %s policy; a group needs a serial one: %w", name, aKind(p.Kind), ErrNotSerial)
	case p.Active == 0:
		return fmt.Errorf("policy %s has no active version in namespace %s, so its groups' runs would wait (wasmsched policy activate %s VERSION): %w",
			name, st.Namespace(), name, ErrUnknownPolicy)
	}
	return nil
}

// placementWhy says where a LAUNCHED run with requirements or on one
// worker may go ("" when neither): which live workers carry them and serve
// the group, and how many of their slots are free (same worker: on the
// freest of them).
func placementWhy(ctx context.Context, st *storage.Store, r client.Run) (string, error) {
	g, err := st.GetGroup(ctx, r.Group)
	if err != nil {
		return "", err
	}
	// its group's requirements and its own (a key in both: the run's)
	m := limits.LabelsMap(g.Require)
	for k, v := range r.Require {
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	same := g.SameWorker || r.SameWorker
	if len(m) == 0 && !same {
		return "", nil
	}
	require := limits.LabelsFromMap(m)
	sv, err := st.Slots(ctx)
	if err != nil {
		return "", err
	}
	need := make([]string, 0, len(require))
	for _, l := range require {
		need = append(need, l.Key+"="+l.Value)
	}
	live, fit, draining, free, most := 0, 0, 0, 0, 0 // most: the free slots of the freest worker
	for _, w := range sv.Workers {
		if !w.Alive {
			continue
		}
		live++
		if !w.Placement.Serves(r.Group) || !w.Placement.Carries(require) {
			continue
		}
		if w.Draining {
			draining++
			continue
		}
		fit++
		n := 0
		for _, sl := range w.Slots {
			if sl.Run == "" {
				n++
			}
		}
		free, most = free+n, max(most, n)
	}
	if len(m) == 0 { // same worker only
		return fmt.Sprintf("launched, waiting for one worker with %d free slots: all of its slots go to one worker (group set --same-worker, submit --same-worker); the freest of the %d live workers that may take it has %d free. ",
			r.Slots, fit, most), nil
	}
	req := strings.Join(need, ", ")
	if fit == 0 {
		msg := fmt.Sprintf("launched, waiting for a worker: it requires %s (group set --require, submit --require), and none of the %d live workers that serve group %s carries it", req, live, r.Group)
		if draining > 0 {
			msg += fmt.Sprintf(" (%d that do are draining)", draining)
		}
		return msg + "; it takes a slot as soon as one registers (worker --label). ", nil
	}
	if same {
		return fmt.Sprintf("launched, waiting for slots: it needs %d slot(s) on one worker with %s (its requirements, same worker): %d live worker(s) have them, the freest with %d slots free; runs ahead of it and other runs that may use those workers take them first. ",
			r.Slots, req, fit, most), nil
	}
	return fmt.Sprintf("launched, waiting for slots: it needs %d slot(s) on workers with %s (its requirements): %d live worker(s) have them, %d of their slots free; runs ahead of it and other runs that may use those workers take them first. ",
		r.Slots, req, fit, free), nil
}
