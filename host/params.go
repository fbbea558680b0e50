package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// ErrInvalidParams is wrapped by the errors of the parameter checks: a
// group parameter its policy does not declare, or one whose value is not of
// its declared type or within its bounds (abi/params). The CLI exits 2, the
// API answers 400.
var ErrInvalidParams = params.ErrInvalid

// moduleParams returns the group parameters module m declares (nil: none).
func (in *Inspector) moduleParams(ctx context.Context, m Module) ([]params.Param, error) {
	p, done, err := in.acquire(ctx, m)
	if err != nil {
		return nil, err
	}
	defer done()
	return p.Params(), nil
}

// policyParams returns the group parameters policy name declares in st's
// namespace: its active pushed version's declaration (the module is
// loaded, once per version, in the Inspector), nil for a built-in (they
// read no parameter) or a name that resolves to nothing.
func (in *Inspector) policyParams(ctx context.Context, st *storage.Store, name string) ([]params.Param, error) {
	m, err := ResolvePolicy(ctx, st, name)
	switch {
	case errors.Is(err, ErrUnknownPolicy):
		return nil, nil // (group set --allow-unpushed: checked when it is pushed)
	case err != nil:
		return nil, err
	case m.Registry == 0:
		return nil, nil
	}
	return in.moduleParams(ctx, m)
}

// checkGroupParams checks a group's parameters (as they will be after a
// change) against what its policy declares. A policy that declares none
// accepts any; else each must be declared, of its type, within its bounds.
// The error names the parameter and wraps ErrInvalidParams.
func (in *Inspector) checkGroupParams(ctx context.Context, st *storage.Store, policy string, ps []abi.Label) error {
	decls, err := in.policyParams(ctx, st, policy)
	if err != nil {
		return err
	}
	if err := params.Check(decls, ps); err != nil {
		return fmt.Errorf("policy %s: %w", policy, err)
	}
	return nil
}

// CheckGroupChange checks a group set before it is written: the group's
// policy and parameters after it (policy "" keeps the group's, or the
// default wait for a new group; set are the parameters given, "" removing
// one; replace: they become all of them).
func (in *Inspector) CheckGroupChange(ctx context.Context, st *storage.Store, group, policy string, set map[string]string, replace bool) error {
	cur := map[string]string{}
	g, err := st.GetGroup(ctx, group)
	switch {
	case err == nil:
		if policy == "" {
			policy = g.Policy
		}
		if m := limits.LabelsMap(g.Params); m != nil && !replace {
			cur = m
		}
	case errors.Is(err, storage.ErrNotFound):
	default:
		return err
	}
	if policy == "" {
		policy = "wait"
	}
	for k, v := range set {
		if v == "" {
			delete(cur, k)
		} else {
			cur[k] = v
		}
	}
	keys := slices.Sorted(maps.Keys(cur))
	ps := make([]abi.Label, 0, len(keys))
	for _, k := range keys {
		ps = append(ps, abi.Label{Key: k, Value: cur[k]})
	}
	return in.checkGroupParams(ctx, st, policy, ps)
}

// CheckPolicyGroups checks the parameters of every group of st whose
// policy is name against decls, the declaration of a version about to
// become name's active one (a push that activates, an activation): the
// error names the first group and parameter that do not fit.
func CheckPolicyGroups(ctx context.Context, st *storage.Store, name string, decls []params.Param) error {
	if len(decls) == 0 {
		return nil
	}
	gs, err := st.ListGroups(ctx)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if g.Policy != name {
			continue
		}
		if err := params.Check(decls, g.Params); err != nil {
			return fmt.Errorf("group %s (policy %s): %w; change it first (group set %s --param k=v, or --replace-params)", g.Name, name, err, g.Name)
		}
	}
	return nil
}

// CheckActivation checks that making version of policy name active keeps
// every group of st that uses it valid (CheckPolicyGroups with that
// version's declaration). Version 0 (none: the built-in) declares nothing.
func (in *Inspector) CheckActivation(ctx context.Context, st *storage.Store, name string, version int) error {
	if version <= 0 {
		return nil
	}
	p, err := st.GetPolicy(ctx, name)
	if err != nil {
		return err
	}
	if version > len(p.Versions) || p.Versions[version-1].Deleted {
		return nil // the activation itself says what is wrong
	}
	v := p.Versions[version-1]
	b, err := st.PolicyBlob(ctx, v.SHA256)
	if err != nil {
		return err
	}
	decls, err := in.moduleParams(ctx, Module{Name: name, Label: fmt.Sprintf("%s v%d", name, version), Registry: version, SHA256: v.SHA256, Wasm: b})
	if err != nil {
		return err
	}
	return CheckPolicyGroups(ctx, st, name, decls)
}
