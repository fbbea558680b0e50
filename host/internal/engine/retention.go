package engine

import (
	"context"
	"errors"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// expireRounds bounds the chunks one group gets per retention pass, so a
// group with a large backlog cannot hold the others up.
const expireRounds = 16

// retireBatch bounds the due groups one retention pass reads.
const retireBatch = 1000

// retention is the leader task that removes finished runs older than their
// retention (the group's, else EngineConfig.Retention), with their index
// entries, in fenced chunks of storage.ExpireChunk, every due group's
// chunk of a round in one pipeline (storage.Store.ExpireBatch), up to
// expireRounds rounds a pass. A term's first pass visits every group (the
// default retention may have changed with the leader); after that a pass
// visits only the groups the retire index says are due
// (storage.Store.RetireDue), and the task sleeps until the next one is due
// (a PollInterval at most), woken early by a finished run (work-events),
// passes at least a RetentionInterval apart. A new leader goes on where a
// deposed one stopped: the expiry is in the data, not in the task.
func (r *Engine) retention(ctx context.Context, lease *leader.Lease) error {
	def := r.cfg.Retention
	if def < 0 {
		def = 0 // forever, unless a group says otherwise
	}
	first := true
	for ctx.Err() == nil {
		wait := r.cfg.PollInterval
		if lease.Valid() {
			groups, next, err := r.retireDue(ctx, first)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("retention: reading the due groups failed", "err", err)
				}
				wait = r.cfg.RetentionInterval
			} else {
				first = false
				if err := r.expireGroups(ctx, lease, groups, def); err != nil {
					return err
				}
				r.m.pass("retention", time.Now())
				if len(groups) > 0 {
					// expire rescored them: when is the first due now?
					if next, err = r.st.NextRetire(ctx); err != nil && ctx.Err() == nil {
						r.log.Warn("retention: reading the retire index failed", "err", err)
						next = time.Now().Add(r.cfg.RetentionInterval)
					}
				}
				if !next.IsZero() {
					wait = min(wait, time.Until(next))
				}
			}
		}
		// At least a RetentionInterval between passes, however often a
		// finished run wakes the task.
		if !leader.Sleep(ctx, r.cfg.RetentionInterval) {
			return nil
		}
		waitWake(ctx, r.retWake, max(wait-r.cfg.RetentionInterval, 0))
	}
	return nil
}

// retireDue lists the groups a pass visits and when the next one is due.
func (r *Engine) retireDue(ctx context.Context, all bool) ([]string, time.Time, error) {
	if !all {
		return r.st.RetireDue(ctx, time.Now(), retireBatch)
	}
	groups, err := r.st.GroupNames(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	retired, err := r.st.RetireGroups(ctx) // a deleted group's finished runs are only there
	if err != nil {
		return nil, time.Time{}, err
	}
	return union(groups, retired), time.Time{}, nil
}

// expireGroups expires the due chunks of groups, one pipelined round trip
// per round, up to expireRounds rounds; it returns only storage.ErrFenced.
func (r *Engine) expireGroups(ctx context.Context, lease *leader.Lease, groups []string, def time.Duration) error {
	for round := 0; round < expireRounds && len(groups) > 0 && lease.Valid(); round++ {
		res := r.st.ExpireBatch(ctx, lease.Fence(), groups, def)
		due := groups[:0]
		for i, x := range res {
			switch {
			case errors.Is(x.Err, storage.ErrFenced):
				r.m.fenced.WithLabelValues(r.m.ns, "retention").Inc()
				return x.Err
			case x.Err != nil:
				if ctx.Err() == nil {
					r.log.Warn("retention: expire failed", "group", groups[i], "err", x.Err)
				}
			default:
				r.m.expired.Add(float64(x.Removed))
				if x.More {
					due = append(due, groups[i])
				}
			}
		}
		groups = due
	}
	return nil
}
