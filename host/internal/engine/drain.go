package engine

import (
	"context"
	"errors"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// drainGroups bounds the groups one drain round reads from the drain set.
const drainGroups = 64

// Drainer is the leader task that discards the WAITING runs a decision's
// discard_below covered (storage.Store.Drain, storage.DrainChunk runs per
// fenced script), one chunk per group per round, so a 100,000-run discard
// never holds Redis for more than one chunk. The covered runs are already
// out of every snapshot, so decisions go on meanwhile. It is woken by an
// apply with a discard_below and otherwise looks every PollInterval (a
// new leader looks first thing: it finishes what a deposed one left in the
// drain set).
type Drainer struct {
	rt   *Engine
	wake chan struct{}
}

// Run drains until ctx ends; it returns storage.ErrFenced on demotion.
func (d *Drainer) Run(ctx context.Context, lease *leader.Lease) error {
	st, log := d.rt.st, d.rt.log
	for ctx.Err() == nil {
		now := d.rt.cfg.PollInterval
		if !lease.Valid() {
			waitWake(ctx, d.wake, now)
			continue
		}
		groups, err := st.DrainGroups(ctx, drainGroups)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("drain: reading the drain set failed", "err", err)
			}
			waitWake(ctx, d.wake, now)
			continue
		}
		if len(groups) == 0 {
			waitWake(ctx, d.wake, now)
			continue
		}
		for _, g := range groups {
			if !lease.Valid() || ctx.Err() != nil {
				break
			}
			n, _, err := st.Drain(ctx, lease.Fence(), g, 0)
			switch {
			case errors.Is(err, storage.ErrFenced):
				d.rt.m.fenced.WithLabelValues(d.rt.m.ns, "drain").Inc()
				return err
			case err != nil:
				if ctx.Err() == nil {
					log.Warn("drain failed", "group", g, "err", err)
				}
			default:
				d.rt.m.drained.Add(float64(n))
			}
		}
		d.rt.m.pass("drain", time.Now())
	}
	return nil
}
