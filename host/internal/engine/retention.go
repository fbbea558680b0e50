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

// retention is the leader task that removes finished runs older than their
// retention (the group's, else EngineConfig.Retention), with their index
// entries: every RetentionInterval, each group, up to expireRounds fenced
// chunks of storage.ExpireChunk, every group's chunk of a round in one
// pipeline (storage.Store.ExpireBatch). A new leader goes
// on where a deposed one stopped: the expiry is in the data, not in the
// task.
func (r *Engine) retention(ctx context.Context, lease *leader.Lease) error {
	def := r.cfg.Retention
	if def < 0 {
		def = 0 // forever, unless a group says otherwise
	}
	for leader.Sleep(ctx, r.cfg.RetentionInterval) {
		if !lease.Valid() {
			continue
		}
		groups, err := r.st.GroupNames(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("retention: reading the groups failed", "err", err)
			}
			continue
		}
		// One pipelined round trip per round for every group still due
		// (storage.ExpireBatch), at most expireRounds rounds per pass: an
		// idle namespace costs one round trip per interval, whatever its
		// number of groups.
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
		r.m.pass("retention", time.Now())
	}
	return nil
}
