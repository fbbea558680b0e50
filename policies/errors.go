package policies

import (
	"errors"
	"strings"
)

// Load errors.
var (
	ErrNotWasm       = errors.New("policies: not a valid wasm module")
	ErrABIVersion    = errors.New("policies: unsupported plugin ABI version")
	ErrMissingExport = errors.New("policies: plugin lacks a required export")
	ErrKind          = errors.New("policies: wrong or unknown policy kind")
	ErrInstantiate   = errors.New("policies: plugin failed to instantiate")
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
type ValidationError struct {
	Problems []string
	snapshot bool
}

func (e *ValidationError) Error() string {
	what := "invalid decision: "
	if e.snapshot {
		what = "invalid snapshot: "
	}
	return what + strings.Join(e.Problems, "; ")
}

func (e *ValidationError) Is(target error) bool {
	if e.snapshot {
		return target == ErrInvalidSnapshot
	}
	return target == ErrInvalidDecision
}
