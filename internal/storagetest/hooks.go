package storagetest

import (
	"context"
	"time"

	"github.com/wasmsched/wasmsched/internal/testhooks"
	"github.com/wasmsched/wasmsched/storage"
)

// AllocateBatch places up to len(ids) LAUNCHED runs in one fenced script,
// the slot manager's call (storage's allocateBatch).
func AllocateBatch(ctx context.Context, st *storage.Store, f storage.Fence, ids []string) ([]storage.AllocResult, error) {
	return testhooks.Get[func(*storage.Store, context.Context, storage.Fence, []string) ([]storage.AllocResult, error)]("storage.allocateBatch")(st, ctx, f, ids)
}

// SetDurability changes how st waits for replicas while calls run.
func SetDurability(st *storage.Store, d storage.Durability) error {
	return testhooks.Get[func(*storage.Store, storage.Durability) error]("storage.setDurability")(st, d)
}

// ListRuns lists the namespace's runs, newest first, filtered.
func ListRuns(ctx context.Context, st *storage.Store, f storage.RunFilter) ([]storage.Run, error) {
	return testhooks.Get[func(*storage.Store, context.Context, storage.RunFilter) ([]storage.Run, error)]("storage.listRuns")(st, ctx, f)
}

// LastAutoRollback returns the policy's last automatic rollback.
func LastAutoRollback(ctx context.Context, st *storage.Store, name string) (storage.AutoRollbackInfo, bool, error) {
	return testhooks.Get[func(*storage.Store, context.Context, string) (storage.AutoRollbackInfo, bool, error)]("storage.lastAutoRollback")(st, ctx, name)
}

// Apply applies one group's decision (the coordinator applies batches).
func Apply(ctx context.Context, st *storage.Store, f storage.Fence, group string, d storage.Decision) (int64, error) {
	return testhooks.Get[func(*storage.Store, context.Context, storage.Fence, string, storage.Decision) (int64, error)]("storage.apply")(st, ctx, f, group, d)
}

// AllocateBackfill is AllocateBatch with backfill under guard.
func AllocateBackfill(ctx context.Context, st *storage.Store, f storage.Fence, ids []string, guard time.Duration) ([]storage.AllocResult, error) {
	return testhooks.Get[func(*storage.Store, context.Context, storage.Fence, []string, time.Duration) ([]storage.AllocResult, error)]("storage.allocateBackfill")(st, ctx, f, ids, guard)
}

// CheckFence returns storage.ErrFenced unless f is the namespace's fence.
func CheckFence(ctx context.Context, st *storage.Store, f storage.Fence) error {
	return testhooks.Get[func(*storage.Store, context.Context, storage.Fence) error]("storage.checkFence")(st, ctx, f)
}

// DirtyGroups returns up to limit groups marked for a decision.
func DirtyGroups(ctx context.Context, st *storage.Store, limit int) ([]string, error) {
	return testhooks.Get[func(*storage.Store, context.Context, int) ([]string, error)]("storage.dirtyGroups")(st, ctx, limit)
}
