// Command staleticker is a host (the public host API, as `wasmsched serve`
// runs it) that also does what a buggy or paused leader would: it keeps
// the fence of its last term and writes a tick with it every TTL/3, also
// after the term ended, skipping every local lease check. Only the storage
// fence stands between it and Redis (tests/leadership_test.go
// TestPausedLeaderIsFenced/unchecked builds and runs it). It logs
// "tick rejected: fenced" with the epoch when the fence refuses a write.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/storage"
)

func main() {
	url := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	ns := flag.String("n", "default", "namespace")
	adv := flag.String("advertise", "stale:1", "advertise address")
	ttl := flag.Duration("lease-ttl", time.Second, "lease TTL")
	flag.Parse()
	if err := run(*url, *ns, *adv, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "staleticker:", err)
		os.Exit(1)
	}
}

func run(url, ns, adv string, ttl time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer rdb.Close()
	st, err := storage.New(rdb, ns)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, host.Config{Store: st, Advertise: adv, LeaseTTL: ttl, Logger: log})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	go staleTicks(ctx, st, h.Identity(), ttl/3, log)
	return h.Run(ctx)
}

// staleTicks remembers the fence of the last term this host led and
// writes a tick with it every interval, whoever leads now.
func staleTicks(ctx context.Context, st *storage.Store, me string, every time.Duration, log *slog.Logger) {
	var fence storage.Fence
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if li, err := st.Leader(ctx); err == nil && li.Identity == me {
			if fence.Epoch != li.Epoch {
				log.Info("stale ticker armed", "epoch", li.Epoch) // the test pauses this host only after this line
			}
			fence = storage.Fence{Epoch: li.Epoch, Holder: me}
		}
		if fence.Holder == "" {
			continue
		}
		if err := st.Tick(ctx, fence); errors.Is(err, storage.ErrFenced) {
			log.Warn("tick rejected: fenced", "epoch", fence.Epoch, "err", err)
		}
	}
}
