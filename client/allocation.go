package client

import (
	"context"
	"slices"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// Allocation is how the namespace's LAUNCHED runs get slots: the
// allocation policy (fifo when unset; the built-ins fifo, fair and
// priority-first, or a pushed allocation policy) and its parameters.
type Allocation struct {
	Policy    string            `json:"policy"`
	FairLabel string            `json:"fair_label,omitempty"` // fair: the label whose values share the slots ("" = across groups)
	Weights   map[string]int    `json:"weights,omitempty"`    // fair: value -> weight (1..1000; a value not named weighs 1)
	Params    map[string]string `json:"params,omitempty"`     // other parameters, for a pushed policy
}

// SetParam sets parameter name to value, or removes it when value is "".
func (a *Allocation) SetParam(name, value string) {
	if value == "" {
		delete(a.Params, name)
		return
	}
	if a.Params == nil {
		a.Params = map[string]string{}
	}
	a.Params[name] = value
}

// SlotUsage is what one group (Key "") or label value holds of the
// namespace's slots.
type SlotUsage struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Slots int    `json:"slots"`
	Runs  int    `json:"runs"`
}

func allocationOf(s storage.AllocationSettings) Allocation {
	return Allocation{Policy: s.PolicyName(), FairLabel: s.FairLabel, Weights: s.Weights, Params: limits.LabelsMap(s.Params)}
}

// Settings converts a to the storage form (Policy "fifo" is stored as
// the default).
func (a Allocation) settings() storage.AllocationSettings {
	s := storage.AllocationSettings{Policy: a.Policy, FairLabel: a.FairLabel, Weights: a.Weights}
	if s.Policy == limits.DefaultAllocation {
		s.Policy = ""
	}
	for k, v := range a.Params {
		s.Params = append(s.Params, abi.Label{Key: k, Value: v})
	}
	slices.SortFunc(s.Params, func(x, y abi.Label) int { return strings.Compare(x.Key, y.Key) })
	return s
}

// Allocation reads the namespace's allocation settings.
func (c *Client) Allocation(ctx context.Context) (Allocation, error) {
	s, err := c.st.Allocation(ctx)
	if err != nil {
		return Allocation{}, err
	}
	return allocationOf(s), nil
}

// SetAllocation sets the namespace's allocation settings (ErrInvalid
// for a malformed one: nothing is written). The leader's next pass uses
// them. It does not check that the policy exists and is an allocation
// policy (host.CheckAllocationPolicy does; the CLI and the HTTP API call
// it): a namespace naming one that is not allocates in launch order and
// logs why.
func (c *Client) SetAllocation(ctx context.Context, a Allocation) error {
	return c.st.SetAllocation(ctx, a.settings())
}

// UsageOf converts an allocation snapshot's usage.
func UsageOf(us []abi.SlotUsage) []SlotUsage {
	out := make([]SlotUsage, 0, len(us))
	for _, u := range us {
		out = append(out, SlotUsage{Key: u.Key, Value: u.Value, Slots: int(u.Slots), Runs: int(u.Runs)})
	}
	return out
}

// AllocationStatus is a namespace's allocation as `namespace show` and the
// API's overview print it: the settings, the free and total slots of live
// workers, the launched runs waiting for slots, and the slots in use.
type AllocationStatus struct {
	// Namespace is set by `namespace show` (the API's path names it).
	Namespace  string     `json:"namespace,omitempty"`
	Allocation Allocation `json:"allocation"`
	Free       int        `json:"free"`
	Slots      int        `json:"slots"`
	Launched   int        `json:"launched"` // runs waiting for slots
	// By is what Usage is keyed by in the API's view: the fair label, or
	// "group" (the CLI lists every key: by group, then by label value).
	By    string      `json:"by,omitempty"`
	Usage []SlotUsage `json:"usage"`
	// Group is one group's slots in use, when one was asked for.
	Group []SlotUsage `json:"group,omitempty"`
}
