package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

// Resolution is which module a policy name stands for in a namespace: its
// active pushed version, else the built-in of that name.
type Resolution struct {
	Name     string
	Registry int    // the active registry version; 0 = the built-in
	SHA256   string // of the module
	builtin  []byte
}

// Builtin reports whether the name resolved to a built-in.
func (r Resolution) Builtin() bool { return r.Registry == 0 }

// Wasm returns the module's bytes: the embedded built-in, or the pushed
// blob read from st.
func (r Resolution) Wasm(ctx context.Context, st *storage.Store) ([]byte, error) {
	if r.builtin != nil {
		return r.builtin, nil
	}
	b, err := st.PolicyBlob(ctx, r.SHA256)
	if err != nil {
		return nil, fmt.Errorf("host: policy %s version %d: %w", r.Name, r.Registry, err)
	}
	return b, nil
}

// ResolvePolicy resolves name in st's namespace (st nil: built-ins only):
// the active pushed version, else the built-in. The one resolver of the
// hosts (PolicySet) and the CLI. A name that is neither, or a policy held
// after an automatic rollback of its only version, is ErrUnknownPolicy.
func ResolvePolicy(ctx context.Context, st *storage.Store, name string) (Resolution, error) {
	var (
		p   storage.Policy
		err = storage.ErrNotFound
	)
	if st != nil {
		p, err = st.GetPolicy(ctx, name)
	}
	switch {
	case err == nil && p.Active > 0 && p.Active <= len(p.Versions):
		return Resolution{Name: name, Registry: p.Active, SHA256: p.Versions[p.Active-1].SHA256}, nil
	case err == nil || errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrInvalid):
		b, ok := plugins.Builtin(name)
		if !ok && err == nil && p.AutoRollback != nil && p.Active == 0 {
			ar := p.AutoRollback
			return Resolution{}, fmt.Errorf("host: policy %q is held: its version %d was rolled back automatically at %s and it has no earlier version (%s); activate a version or push a fixed one: %w",
				name, ar.From, ar.At.UTC().Format(time.RFC3339), ar.Reason, ErrUnknownPolicy)
		}
		if !ok {
			return Resolution{}, fmt.Errorf("host: policy %q: not pushed and active, not a built-in (built-ins: %v): %w",
				name, plugins.Names(), ErrUnknownPolicy)
		}
		return Resolution{Name: name, SHA256: digest.SHA256(b), builtin: b}, nil
	default:
		return Resolution{}, fmt.Errorf("host: resolve policy %s: %w", name, err)
	}
}

// BuiltinPolicies names the built-in policies (the embedded defaults).
func BuiltinPolicies() []string { return plugins.Names() }
