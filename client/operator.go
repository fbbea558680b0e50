package client

import "context"

// The operator's actions on groups, policies and the namespace: what
// `group delete` and `policy activate|rollback|delete` run, and the HTTP
// API's policy routes. Each is one store call; who and note go into the
// policy's history.

// Exists reports whether anything was ever written in the namespace (a
// group, run, policy, worker or leader).
func (c *Client) Exists(ctx context.Context) (bool, error) { return c.st.Exists(ctx) }

// DeleteGroup deletes group name. A group with active runs is refused
// (ErrBadState), and so is one with waiting runs unless force, which
// discards them first with reason and returns how many. Finished runs keep
// their records. ErrNotFound for an unknown group.
func (c *Client) DeleteGroup(ctx context.Context, name string, force bool, reason string) (discarded int, err error) {
	return c.st.DeleteGroup(ctx, name, force, reason)
}

// Policy returns policy name as it is in the namespace's registry
// (ErrNotFound when nothing was pushed under it).
func (c *Client) Policy(ctx context.Context, name string) (Policy, error) {
	p, err := c.st.GetPolicy(ctx, name)
	if err != nil {
		return Policy{}, err
	}
	return policyOf(p, false), nil
}

// ActivatePolicy makes pushed version of policy name active (0: none, the
// built-in of a built-in name); every host deciding with it swaps at once.
// ErrNotFound for an unknown policy or version.
func (c *Client) ActivatePolicy(ctx context.Context, name string, version int, who, note string) error {
	return c.st.ActivatePolicy(ctx, name, version, who, note)
}

// RollbackPolicy makes the version active before the current one active
// again and returns it (past the first activation: version 0, the
// built-in). ErrBadState when version 0 is active already.
func (c *Client) RollbackPolicy(ctx context.Context, name, who, note string) (PolicyVersion, error) {
	v, err := c.st.RollbackPolicy(ctx, name, who, note)
	if err != nil {
		return PolicyVersion{}, err
	}
	return PolicyVersion{Version: v.Version, SHA256: v.SHA256, PushedAt: v.PushedAt.UTC(), Who: v.Who, Note: v.Note, Deleted: v.Deleted}, nil
}

// DeletePolicy deletes version (>= 1) of policy name, or with version 0 the
// whole policy, and returns how many stored blobs it freed. An active
// version cannot be deleted, nor a policy with one (ErrBadState); a deleted
// version keeps its number and leaves the rollback stack. ErrNotFound for
// an unknown policy or version.
func (c *Client) DeletePolicy(ctx context.Context, name string, version int, who, note string) (int, error) {
	return c.st.DeletePolicy(ctx, name, version, who, note)
}
