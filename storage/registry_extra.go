package storage

import (
	"context"
	"strconv"
	"time"

	"github.com/wasmsched/wasmsched/internal/limits"
)

// AutoRollback is the outcome of AutoRollbackPolicy.
type AutoRollback struct {
	RolledBack bool // false: the failing version was no longer active; nothing written
	Active     int  // the active version afterwards (0 = the built-in)
}

// AutoRollbackPolicy rolls policy name back to the version active before
// version, but only if version is still the active one: a host that saw K
// consecutive failures of version calls it, and when several hosts (or an
// operator) react at once, only the first rollback happens. The reason is
// recorded in the history (action "auto-rollback") and in the policy hash
// (AutoRollbackInfo). With no earlier active version the policy falls back
// to version 0: the embedded built-in of a built-in name; for any other
// name no active version, so the groups naming it hold (their runs wait)
// until a version is activated or pushed. Errors: ErrNotFound, ErrInvalid.
// Unfenced like the other registry writes: it expresses a conditional
// intent, checked atomically in the script.
func (s *Store) AutoRollbackPolicy(ctx context.Context, name string, version int, who, reason string) (AutoRollback, error) {
	const op = "auto rollback policy"
	if err := limits.ValidateName("policy", name); err != nil {
		return AutoRollback{}, err
	}
	if version < 1 {
		return AutoRollback{}, invalid(op, "policy %s: version %d, want >= 1", name, version)
	}
	for _, x := range [][2]string{{"who", who}, {"reason", reason}} {
		if err := validateText(op, x[0], x[1]); err != nil {
			return AutoRollback{}, err
		}
	}
	k := s.k
	v, err := s.run(ctx, op, "auto_rollback_policy",
		[]string{k.Policy(name), k.PolicyHistory(name), k.PolicyActivations(name), k.PolicyGen(), k.Dirty(), k.Groups()},
		name, strconv.Itoa(version), who, reason, k.PolicyChannel())
	if err != nil {
		return AutoRollback{}, err
	}
	a := v.([]any)
	return AutoRollback{RolledBack: toInt64(a[0]) == 1, Active: int(toInt64(a[1]))}, nil
}

// AutoRollbackInfo is the last automatic rollback of a policy.
type AutoRollbackInfo struct {
	From, To int
	At       time.Time
	Reason   string
}

// lastAutoRollback returns the policy's last automatic rollback; ok is false
// if it never had one (or the policy does not exist).
func (s *Store) lastAutoRollback(ctx context.Context, name string) (info AutoRollbackInfo, ok bool, err error) {
	if err := limits.ValidateName("policy", name); err != nil {
		return info, false, err
	}
	vals, err := s.c.HMGet(ctx, s.k.Policy(name), autoRollbackFields...).Result()
	if err != nil {
		return info, false, err
	}
	p := parseAutoRollback(vals)
	if p == nil {
		return info, false, nil
	}
	return *p, true, nil
}

// autoRollbackFields are the policy hash fields of the last automatic
// rollback, in the order parseAutoRollback reads them.
var autoRollbackFields = []string{"auto_rollback_from", "auto_rollback_to", "auto_rollback_at", "auto_rollback_reason"}

// parseAutoRollback reads HMGET values of autoRollbackFields; nil if the
// policy never had an automatic rollback.
func parseAutoRollback(vals []any) *AutoRollbackInfo {
	if len(vals) < len(autoRollbackFields) || vals[0] == nil {
		return nil
	}
	return &AutoRollbackInfo{From: int(toInt64(vals[0])), To: int(toInt64(vals[1])), At: msTime(toInt64(vals[2])), Reason: str(vals[3])}
}
