package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host/internal/engine"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// ErrNotAllocation is returned (wrapped) for a policy that is not an
// allocation policy where one is needed.
var ErrNotAllocation = errors.New("not an allocation policy")

// allocationPolicies names the built-in allocation policies.
func allocationPolicies() []string {
	var out []string
	for _, p := range plugins.All() {
		if p.Kind == abi.KindAllocation {
			out = append(out, p.Name)
		}
	}
	return out
}

// CheckAllocationPolicy reports whether name can order st's namespace's
// launched runs: a built-in allocation policy, or a pushed allocation
// policy with an active version (namespace set --allocate and the HTTP
// API refuse others with this message). Errors wrap ErrUnknownPolicy or
// ErrNotAllocation.
func CheckAllocationPolicy(ctx context.Context, st *storage.Store, name string) error {
	builtins := strings.Join(allocationPolicies(), ", ")
	if bp, ok := plugins.Lookup(name); ok {
		if bp.Kind != abi.KindAllocation {
			return fmt.Errorf("policy %s is %s policy; --allocate needs an allocation policy (%s, or a pushed allocation policy): %w", name, aKind(bp.Kind.String()), builtins, ErrNotAllocation)
		}
		return nil
	}
	p, err := st.GetPolicy(ctx, name)
	switch {
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrInvalid):
		return fmt.Errorf("policy %s is neither a built-in allocation policy (%s) nor pushed in namespace %s (wasmsched policy push %s FILE): %w",
			name, builtins, st.Namespace(), name, ErrUnknownPolicy)
	case err != nil:
		return err
	case p.Kind != abi.KindAllocation.String():
		return fmt.Errorf("policy %s is %s policy; --allocate needs an allocation policy: %w", name, aKind(p.Kind), ErrNotAllocation)
	case p.Active == 0:
		return fmt.Errorf("policy %s has no active version in namespace %s (wasmsched policy activate %s VERSION): %w",
			name, st.Namespace(), name, ErrUnknownPolicy)
	}
	return nil
}

// AllocationSnapshot reads the allocation snapshot the leader's next pass
// would send the namespace's allocation policy (the window of
// engine.DefaultBatchSize launched runs, 1,000), and the settings, writing nothing.
func AllocationSnapshot(ctx context.Context, st *storage.Store) (*abi.AllocationSnapshot, storage.AllocationSettings, error) {
	return engine.ReadAllocationSnapshot(ctx, st, engine.DefaultBatchSize/2)
}

// AllocationOrder is an allocation decision as records.
type AllocationOrder struct {
	Policy  string   `json:"policy"`
	Version string   `json:"version"`
	Valid   bool     `json:"valid"`
	Outcome string   `json:"outcome"`
	Errors  []string `json:"errors"`
	Order   []string `json:"order"` // run ids, in the order they get slots
	// Workers, when the policy names any (ABI version 5): the worker of
	// each run of Order, "" where it leaves the choice to the host.
	Workers []string `json:"workers,omitempty"`
}

// DecideAllocation has m order snap's runs, read-only. A load error or
// ErrNotAllocation is the error; an order that is invalid, traps or
// times out is an AllocationOrder with Valid false.
func (in *Inspector) DecideAllocation(ctx context.Context, m Module, snap *abi.AllocationSnapshot) (AllocationOrder, error) {
	out := AllocationOrder{Policy: m.Label, Version: m.SHA256, Errors: []string{}, Order: []string{}}
	p, done, err := in.acquire(ctx, m)
	if err != nil {
		return out, err
	}
	defer done()
	if p.Kind() != abi.KindAllocation {
		return out, fmt.Errorf("policy %s is %s: %w", m.Label, p.Kind(), ErrNotAllocation)
	}
	d, err := p.DecideAllocation(ctx, snap)
	out.Valid = err == nil
	out.Outcome = outcome(err)
	if err != nil {
		out.Errors = policies.Problems(err)
		return out, nil
	}
	for _, i := range d.Order {
		out.Order = append(out.Order, snap.Runs[i].ID)
	}
	if len(d.Workers) > 0 {
		out.Workers = make([]string, len(d.Order))
		for j, w := range d.Workers {
			if w >= 0 {
				out.Workers[j] = snap.Workers[w].Worker
			}
		}
	}
	return out, nil
}

// AllocationPolicyName maps the shorthand --allocate priority (the serial
// built-in's name, never an allocation policy) to priority-first.
func AllocationPolicyName(name string) string {
	if name == "priority" {
		return "priority-first"
	}
	return name
}

// AllocationStatus is what the UI and namespace show print: the settings,
// capacity, the launched queue's length, and the slots in use per group
// and per value of the fair label (Usage; Group: of one group's runs).
type AllocationStatus struct {
	Settings storage.AllocationSettings
	Free     int
	Slots    int
	Launched int
	Usage    []abi.SlotUsage // groups, then label values (as the policy sees it)
	Group    []abi.SlotUsage // with group != "": that group's runs, per value of the fair label
}

// ReadAllocationStatus reads the allocation status (read only: the
// capacity, the queue's length and the runs holding slots, not the queue).
func ReadAllocationStatus(ctx context.Context, st *storage.Store, group string) (AllocationStatus, error) {
	v, err := st.AllocationState(ctx, 1, true)
	if err != nil {
		return AllocationStatus{}, err
	}
	out := AllocationStatus{Settings: v.Settings, Free: v.Free, Slots: v.Slots, Launched: v.Total}
	ids := make([]string, 0, len(v.Holding))
	for id := range v.Holding {
		ids = append(ids, id)
	}
	infos, err := st.AllocInfos(ctx, ids)
	if err != nil {
		return out, err
	}
	byLabel := map[string]*abi.SlotUsage{}
	info := map[string]abi.AllocRun{}
	for _, in := range infos {
		if !in.OK {
			continue
		}
		info[in.Run.ID] = in.Run
		if group == "" || in.Run.Group != group {
			continue
		}
		val := ""
		for _, l := range in.Run.Labels {
			if l.Key == v.Settings.FairLabel {
				val = l.Value
			}
		}
		u := byLabel[val]
		if u == nil {
			u = &abi.SlotUsage{Key: v.Settings.FairLabel, Value: val}
			byLabel[val] = u
		}
		u.Slots += uint32(v.Holding[in.Run.ID])
		u.Runs++
	}
	snap, _ := engine.BuildAllocationSnapshot(&storage.AllocationView{Holding: v.Holding, Settings: v.Settings}, info)
	out.Usage = snap.Usage
	for _, u := range byLabel {
		out.Group = append(out.Group, *u)
	}
	slices.SortFunc(out.Group, func(a, b abi.SlotUsage) int {
		if a.Slots != b.Slots {
			return int(b.Slots) - int(a.Slots)
		}
		return strings.Compare(a.Value, b.Value)
	})
	return out, nil
}
