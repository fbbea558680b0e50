package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/storage"
)

// uncheckedTickTask is `serve --debug-unchecked-ticks`, a test hook (the
// paused-leader fencing test, tests/leadership_test.go): the host's tick
// without the lease check, plus one last write with the term's stale fence
// after the term ended, so the storage fence is seen rejecting a deposed
// leader's write. It replaces the built-in tick task.
func uncheckedTickTask(st *storage.Store, interval time.Duration, log *slog.Logger) host.LeaderTask {
	return func(ctx context.Context, lease *host.Lease) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				defer cancel()
				log.Info("unchecked tick: writing with a stale fence after the term ended", "epoch", lease.Epoch())
				_ = host.Tick(wctx, st, lease, log)
				return nil
			case <-t.C:
			}
			if err := host.Tick(ctx, st, lease, log); err != nil {
				return err
			}
		}
	}
}
