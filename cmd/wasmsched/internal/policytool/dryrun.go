package policytool

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Decide has pol decide snap, read-only, with the CLI's errors: a bad
// module or snapshot, or a policy of the wrong kind, is bad input.
func Decide(ctx context.Context, in *host.Inspector, pol Policy, snap *abi.SerialSnapshot) (client.PolicyDecision, error) {
	d, err := in.Decide(ctx, pol.Module, snap)
	if err = decideError(err, pol); err != nil {
		return d, err
	}
	terms(&d)
	return d, nil
}

func decideError(err error, pol Policy) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, host.ErrNotSerial):
		return badinput.Errorf("policy %s is not a serial policy; dry-run decides for serial groups (use policy test with a \"request\" scenario for slot-reuse)", pol.Label)
	case errors.Is(err, policies.ErrInvalidSnapshot):
		return badinput.Wrap(err)
	}
	return LoadError(err)
}

func terms(d *client.PolicyDecision) {
	for i := range d.Errors {
		d.Errors[i] = Terms(d.Errors[i])
	}
}

// DryRun has the policy polArg (FILE|NAME) decide snap, or with group the
// live group (beside the group's own policy, diffed), writing nothing.
func DryRun(ctx context.Context, sb Sandbox, st *storage.Store, polArg string, snap *abi.SerialSnapshot, group string) (client.DryRun, error) {
	if group != "" {
		sn, err := st.GetGroup(ctx, group)
		if errors.Is(err, errs.ErrNotFound) || (err == nil && sn.Policy == "") {
			return client.DryRun{}, badinput.Errorf("group %s not found in namespace %s", group, st.Namespace())
		}
		if err != nil {
			return client.DryRun{}, storeInput(err)
		}
		if _, err := Resolve(ctx, st, sn.Policy); err != nil {
			return client.DryRun{}, fmt.Errorf("group %s: its policy: %w", group, err)
		}
	}
	cand, err := Resolve(ctx, st, polArg)
	if err != nil {
		return client.DryRun{}, err
	}
	rt, err := NewRuntime(ctx, sb)
	if err != nil {
		return client.DryRun{}, err
	}
	defer rt.Close(context.Background())
	in := host.NewInspector(rt)
	defer in.Close(context.Background())
	if group == "" {
		cd, err := Decide(ctx, in, cand, snap)
		return client.DryRun{PolicyDecision: cd, Diff: []client.ActionDiff{}}, err
	}
	res, err := in.DryRun(ctx, st, cand.Module, group)
	if errors.Is(err, host.ErrUnknownGroup) {
		return client.DryRun{}, badinput.Errorf("group %s not found in namespace %s", group, st.Namespace())
	}
	if err = decideError(err, cand); err != nil {
		return client.DryRun{}, err
	}
	terms(&res.PolicyDecision)
	terms(res.Active)
	return res, nil
}

// storeInput marks storage errors the user fixes by changing the command
// (bad input, unknown names, wrong state, duplicates) as bad input.
func storeInput(err error) error {
	switch {
	case errors.Is(err, errs.ErrInvalid), errors.Is(err, errs.ErrNotFound),
		errors.Is(err, errs.ErrBadState), errors.Is(err, errs.ErrDuplicate):
		return badinput.Wrap(err)
	}
	return err
}
