package host

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
// chunks of storage.ExpireChunk (storage.Store.Expire). A new leader goes
// on where a deposed one stopped: the expiry is in the data, not in the
// task.
func (r *Engine) retention(ctx context.Context, lease *Lease) error {
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
		for _, g := range groups {
			for range expireRounds {
				if !lease.Valid() || ctx.Err() != nil {
					break
				}
				n, more, err := r.st.Expire(ctx, lease.Fence(), g, def, 0)
				if errors.Is(err, storage.ErrFenced) {
					r.m.fenced.WithLabelValues(r.m.ns, "retention").Inc()
					return err
				}
				if err != nil {
					if ctx.Err() == nil {
						r.log.Warn("retention: expire failed", "group", g, "err", err)
					}
					break
				}
				r.m.expired.Add(float64(n))
				if !more {
					break
				}
			}
		}
		r.m.pass("retention", time.Now())
	}
	return nil
}
