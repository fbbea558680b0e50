package policies

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmsched/wasmsched/policies/internal/wasmrewrite"
)

// Load's bounded steps, in order: static limits (checkLimits), wazero's
// validation of the module as given (validate), the deadline rewrite
// (inline mode), compilation under Config.CompileTimeout (bounded), then
// the load-time calls (call0, loadCallError).

// checkLimits enforces the static limits (limits.go) on the bytes as given.
func checkLimits(cfg Config, name string, wasm []byte) (wasmrewrite.Info, error) {
	info, err := wasmrewrite.Check(wasm, cfg.limits())
	var le *wasmrewrite.LimitError
	switch {
	case err == nil:
		return info, nil
	case errors.As(err, &le):
		return info, fmt.Errorf("%w: policy %q: %v", ErrLimit, name, le)
	case errors.Is(err, wasmrewrite.ErrUnsupported):
		return info, fmt.Errorf("%w: policy %q: %v (policies may use the wasm MVP plus sign extension, saturating truncation, bulk memory and reference types)",
			ErrNotWasm, name, strings.TrimPrefix(err.Error(), "wasmrewrite: "))
	default:
		return info, fmt.Errorf("%w: policy %q: malformed module: %v", ErrNotWasm, name, strings.TrimPrefix(err.Error(), "wasmrewrite: "))
	}
}

// maxValidated bounds the memo of modules already validated.
const maxValidated = 1024

// validate runs wazero's own validation on the module exactly as given,
// before any rewrite: the rewrite appends globals and a function, so a
// module naming indices it never declared would become valid after it.
// wazero's interpreter engine decodes and validates without generating
// machine code (about a tenth of a compile); a module that passed is
// remembered by sha256 for the process, so a version loaded again (hot
// swap back, another namespace) is not validated twice.
func (r *Runtime) validate(ctx context.Context, name string, sum [sha256.Size]byte, wasm []byte) error {
	r.mu.Lock()
	ok := r.validated[sum]
	if !ok && r.validator == nil {
		r.validator = wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter().
			WithMemoryLimitPages(uint32(r.cfg.MemoryLimit/wasmPageSize)))
	}
	v := r.validator
	r.mu.Unlock()
	if ok {
		return nil
	}
	cm, err := r.bounded(ctx, func(ctx context.Context) (wazero.CompiledModule, error) { return v.CompileModule(ctx, wasm) })
	if err != nil {
		if errors.Is(err, ErrCompileTimeout) {
			return fmt.Errorf("%w: policy %q: validating took longer than %v (Config.CompileTimeout)", ErrCompileTimeout, name, r.cfg.CompileTimeout)
		}
		return fmt.Errorf("%w: policy %q: invalid module: %v", ErrNotWasm, name, err)
	}
	_ = cm.Close(context.Background())
	r.mu.Lock()
	if r.validated == nil || len(r.validated) >= maxValidated {
		r.validated = map[[sha256.Size]byte]bool{}
	}
	r.validated[sum] = true
	r.mu.Unlock()
	return nil
}

// bounded runs compile (a wazero CompileModule) under
// Config.CompileTimeout. wazero checks the context between functions, not
// inside one, so on timeout bounded returns at once with ErrCompileTimeout
// and leaves the compile to stop by itself at its next function (the
// static limits bound one function's cost); a module it still produces is
// closed, so nothing of a timed-out compile is kept. ctx cancels it too.
func (r *Runtime) bounded(ctx context.Context, compile func(context.Context) (wazero.CompiledModule, error)) (wazero.CompiledModule, error) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CompileTimeout)
	type result struct {
		m   wazero.CompiledModule
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := compile(cctx)
		ch <- result{m, err}
	}()
	select {
	case res := <-ch:
		timedOut := cctx.Err() != nil
		cancel()
		if res.err != nil && timedOut && ctx.Err() == nil {
			return nil, ErrCompileTimeout
		}
		if res.err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return res.m, res.err
	case <-cctx.Done():
		cancel()
		go func() {
			if res := <-ch; res.m != nil {
				_ = res.m.Close(context.Background())
			}
		}()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrCompileTimeout
	}
}

// callFailure is a failed call of an export, with a message in the
// plugin author's terms (no wasm stack trace for a deadline).
type callFailure struct {
	sentinel error // ErrTimeout or ErrTrap
	msg      string
}

func (e *callFailure) Error() string        { return e.msg }
func (e *callFailure) Is(target error) bool { return target == e.sentinel }

// deadlineFailure says that export did not return within its deadline.
func deadlineFailure(export string, d time.Duration, knob string) error {
	return &callFailure{sentinel: ErrTimeout, msg: fmt.Sprintf("%s did not return within its deadline of %v (%s)", export, d, knob)}
}

// trapFailure is a trap of export, its wazero message shortened.
func trapFailure(export string, err error) error {
	return &callFailure{sentinel: ErrTrap, msg: fmt.Sprintf("%s trapped: %s", export, trimTrap(err))}
}

// Bounds of a trap message: its first line and a few frames of the wasm
// stack, at most maxTrapBytes.
const (
	maxTrapFrames = 6
	maxTrapBytes  = 1024
)

// trimTrap shortens a wazero error: the first line, then at most
// maxTrapFrames frames of its wasm stack trace, at most maxTrapBytes.
func trimTrap(err error) string {
	lines := strings.Split(err.Error(), "\n")
	keep := lines
	if len(keep) > 2+maxTrapFrames { // message, "wasm stack trace:", frames
		keep = append(keep[:2+maxTrapFrames:2+maxTrapFrames], fmt.Sprintf("\t... %d more frames", len(lines)-2-maxTrapFrames))
	}
	return truncate(strings.Join(keep, "\n"), maxTrapBytes)
}

// truncate bounds s to n bytes, saying how much it dropped.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:n], len(s)-n)
}

// loadCallError is a failed call at load (wasmsched_abi_version,
// wasmsched_kind): these must return a constant at once.
func loadCallError(name, export string, err error) error {
	return fmt.Errorf("%w: policy %q: %w (it must return a constant)", ErrInstantiate, name, err)
}
