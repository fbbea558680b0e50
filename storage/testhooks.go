package storage

import "github.com/wasmsched/wasmsched/internal/testhooks"

// Test-only operations, reached through internal/storagetest (never part
// of storage's API; see internal/testhooks).
func init() {
	testhooks.Register("storage.allocateBatch", (*Store).allocateBatch)
	testhooks.Register("storage.setDurability", (*Store).setDurability)
	testhooks.Register("storage.listRuns", (*Store).listRuns)
	testhooks.Register("storage.lastAutoRollback", (*Store).lastAutoRollback)
	testhooks.Register("storage.apply", (*Store).apply)
	testhooks.Register("storage.allocateBackfill", (*Store).allocateBackfill)
	testhooks.Register("storage.checkFence", (*Store).checkFence)
	testhooks.Register("storage.dirtyGroups", (*Store).dirtyGroups)
}
