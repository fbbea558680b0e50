package storagetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/storage"
)

// AllocateOne gives the LAUNCHED run id its slots through
// storage's allocateBatch (what the slot manager calls), failing the test on
// any outcome but allocated.
func AllocateOne(tb testing.TB, ctx context.Context, st *storage.Store, f storage.Fence, id string) []storage.Assignment {
	tb.Helper()
	as, err := TryAllocateOne(ctx, st, f, id)
	if err != nil {
		tb.Fatal(err)
	}
	return as
}

// TryAllocateOne is AllocateOne returning the outcome as an error:
// storage.ErrNoSlots when the run does not fit, storage.ErrBadState when it
// is not LAUNCHED (or gone), or the batch's own error (ErrFenced,
// ErrInvalid).
func TryAllocateOne(ctx context.Context, st *storage.Store, f storage.Fence, id string) ([]storage.Assignment, error) {
	res, err := AllocateBatch(ctx, st, f, []string{id})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("storagetest: allocate %s: %d results", id, len(res))
	}
	switch r := res[0]; r.Outcome {
	case storage.AllocAllocated:
		return r.Assignments, nil
	case storage.AllocNoSlots:
		return nil, fmt.Errorf("storagetest: allocate %s: needs %d, %d free: %w", id, r.Needed, r.Found, storage.ErrNoSlots)
	default:
		return nil, fmt.Errorf("storagetest: allocate %s: %s (state %q): %w", id, r.Outcome, r.State, storage.ErrBadState)
	}
}
