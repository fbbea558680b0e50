package storage

import (
	"context"
	"time"
)

// Test-only views of the embedded scripts (export_test.go: test builds of
// this package only).
var (
	ScriptNames  = scriptNames
	ScriptSource = func(name string) string { return scriptSrc[name] }
)

// Bounds and helpers the external tests (package storage_test) name.
const (
	MaxCronLen            = maxCronLen
	MaxTZLen              = maxTZLen
	UnlinkChunk           = unlinkChunk
	DecisionsKept         = decisionsKept
	IdempotencyTTL        = idempotencyTTL
	MaxStopReason         = maxStopReason
	SeriesLifetime        = seriesLifetime
	DurableAuto           = durableAuto
	DefaultDurableTimeout = defaultDurableTimeout
	DurableRecheck        = durableRecheck
	DueChunk              = dueChunk
	ModeSingle            = modeSingle
	ModeCluster           = modeCluster
	ModeSentinel          = modeSentinel
	RunWatchBuffer        = runWatchBuffer
)

var (
	ScheduleTicks  = scheduleTicks
	ScheduleRunID  = scheduleRunID
	ParseRunEvents = parseRunEvents
)

// Test-only methods the external tests call by their old names.
func (s *Store) AllocateBatch(ctx context.Context, f Fence, ids []string) ([]AllocResult, error) {
	return s.allocateBatch(ctx, f, ids)
}
func (s *Store) SetDurability(d Durability) error { return s.setDurability(d) }
func (s *Store) Durability() Durability           { return s.durability() }
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	return s.listRuns(ctx, f)
}
func (s *Store) Expire(ctx context.Context, f Fence, group string, def time.Duration, chunk int) (int, bool, error) {
	return s.expire(ctx, f, group, def, chunk)
}
func (s *Store) LastAutoRollback(ctx context.Context, name string) (AutoRollbackInfo, bool, error) {
	return s.lastAutoRollback(ctx, name)
}
func (s *Store) NamespaceMaxRunSlots(ctx context.Context) (int, error) {
	return s.namespaceMaxRunSlots(ctx)
}
func (s *Store) Apply(ctx context.Context, f Fence, group string, d Decision) (int64, error) {
	return s.apply(ctx, f, group, d)
}
func (s *Store) AllocateBackfill(ctx context.Context, f Fence, ids []string, guard time.Duration) ([]AllocResult, error) {
	return s.allocateBackfill(ctx, f, ids, guard)
}
func (s *Store) CheckFence(ctx context.Context, f Fence) error { return s.checkFence(ctx, f) }
func (s *Store) DirtyGroups(ctx context.Context, limit int) ([]string, error) {
	return s.dirtyGroups(ctx, limit)
}
func (s *Store) Register(ctx context.Context) error { return s.register(ctx) }
