package storagetest

import (
	"context"

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
