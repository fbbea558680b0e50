package policies

import (
	"errors"
	"fmt"
	"strings"
)

// Load errors.
var (
	ErrNotWasm       = errors.New("policies: not a valid wasm module")
	ErrABIVersion    = errors.New("policies: unsupported plugin ABI version")
	ErrMissingExport = errors.New("policies: plugin lacks a required export")
	ErrKind          = errors.New("policies: wrong or unknown policy kind")
	ErrInstantiate   = errors.New("policies: plugin failed to instantiate")
	// ErrLimit: the module exceeds a static limit (limits.go); the error
	// names the limit, the module's value and the limit's value.
	ErrLimit = errors.New("policies: plugin exceeds a static limit")
	// ErrCompileTimeout: validating or compiling the module took longer
	// than Config.CompileTimeout; nothing of it is kept.
	ErrCompileTimeout = errors.New("policies: compiling the plugin exceeded its deadline")
	// ErrConformance is returned (wrapped) by Gate when a plugin loads but
	// fails the conformance run: a call traps, exceeds its deadline,
	// returns an invalid decision, or the whole run exceeds the gate's
	// deadline.
	ErrConformance = errors.New("policies: plugin failed the conformance run")
)

// Call errors.
var (
	ErrTrap            = errors.New("policies: policy trapped")
	ErrTimeout         = errors.New("policies: policy call exceeded its deadline")
	ErrInvalidDecision = errors.New("policies: invalid decision")
	ErrInvalidSnapshot = errors.New("policies: invalid snapshot")
	ErrClosed          = errors.New("policies: policy closed")
)

// ValidationError lists every problem found in a decision (or snapshot).
// errors.Is(err, ErrInvalidDecision) holds for decision problems.
// At most maxProblems are listed; More counts the others.
type ValidationError struct {
	Problems []string
	More     int
	snapshot bool
}

func (e *ValidationError) Error() string {
	what := "invalid decision: "
	if e.snapshot {
		what = "invalid snapshot: "
	}
	msg := what + strings.Join(e.Problems, "; ")
	if e.More > 0 {
		msg += fmt.Sprintf("; and %d more problem(s)", e.More)
	}
	return msg
}

func (e *ValidationError) Is(target error) bool {
	if e.snapshot {
		return target == ErrInvalidSnapshot
	}
	return target == ErrInvalidDecision
}
