package policytool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// PushResult is a pushed version.
type PushResult struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	SHA256  string `json:"sha256"`
	Kind    string `json:"kind"`
	Active  bool   `json:"active"`
	Cases   int    `json:"conformance_cases"`
}

// Push gates wasm and pushes it as a new version of name, recorded as by
// who. Nothing is written unless the gate passes.
func Push(ctx context.Context, sb Sandbox, st *storage.Store, name string, wasm []byte, who, note string, activate bool, deadline time.Duration) (PushResult, error) {
	bp, builtin := plugins.Lookup(name)
	want := bp.Kind
	if !builtin {
		p, err := st.GetPolicy(ctx, name)
		switch {
		case err == nil:
			k, kerr := abi.ParseKind(p.Kind)
			if kerr != nil {
				return PushResult{}, fmt.Errorf("policy %s: registry kind: %w", name, kerr)
			}
			want = k
		case !errors.Is(err, errs.ErrNotFound):
			return PushResult{}, err
		}
	}
	rt, err := NewRuntime(ctx, sb)
	if err != nil {
		return PushResult{}, err
	}
	defer rt.Close(context.Background())
	rep, err := policies.Gate(ctx, rt, name, wasm, policies.GateOptions{Kind: want, Deadline: deadline})
	if err != nil {
		return PushResult{}, LoadError(fmt.Errorf("push %s refused, nothing written: %w", name, err))
	}
	if activate {
		// the version becomes active: the groups that use the name must
		// have parameters it accepts
		if err := host.CheckPolicyGroups(ctx, st, name, rep.Params); errors.Is(err, host.ErrInvalidParams) {
			return PushResult{}, badinput.Errorf("push %s refused, nothing written: %v", name, strings.TrimSuffix(err.Error(), ": "+host.ErrInvalidParams.Error()))
		} else if err != nil {
			return PushResult{}, err
		}
	}
	v, err := st.PushPolicy(ctx, storage.PushRequest{Name: name, Kind: rep.Kind.String(), Who: who, Note: note, Blob: wasm, Activate: activate})
	if errors.Is(err, errs.ErrDuplicate) {
		return PushResult{}, badinput.Errorf("push %s refused: these bytes (sha256 %s) are already version %d; use policy activate %s %d", name, digest.Short(rep.SHA256), v.Version, name, v.Version)
	}
	if err != nil {
		return PushResult{}, storeInput(err)
	}
	return PushResult{Name: name, Version: v.Version, SHA256: v.SHA256, Kind: rep.Kind.String(), Active: activate, Cases: rep.Cases}, nil
}
