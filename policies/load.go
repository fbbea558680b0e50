package policies

import (
	"errors"
	"fmt"
	"strings"
	"time"

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
