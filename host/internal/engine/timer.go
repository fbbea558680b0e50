package engine

import (
	"context"
	"errors"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// timerBatch bounds the due groups (and schedules) one timer pass reads.
const timerBatch = 64

// timer is the leader task that runs time: it moves the due delayed runs
// of each group whose timer is due into the group's queue and fires the
// policy wakes that are due (storage.Store.DueBatch: the group becomes
// dirty and the coordinator decides it) and fires due schedules
// (fireSchedules). It reads what is
// due by Redis time (storage.Store.Timers, one script) and sleeps until
// the next timer, a PollInterval at most, woken early by a TimerEvent on
// work-events (a delayed submit, a parked retry, a schedule change). The
// timers are in Redis: a new leader fires what a deposed one did not.
func (r *Engine) timer(ctx context.Context, lease *leader.Lease) error {
	for ctx.Err() == nil {
		wait := r.cfg.PollInterval
		if lease.Valid() {
			ts, err := r.st.Timers(ctx, timerBatch)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					r.log.Warn("timer: reading the timers failed", "err", err)
				}
				wait = r.cfg.Backoff
			default:
				ok, err := r.fireDue(ctx, lease, ts)
				if err != nil {
					return err
				}
				r.m.pass("timer", time.Now())
				if len(ts.Groups) > 0 || len(ts.Schedules) > 0 {
					if ok {
						continue // they moved: read the timers again
					}
					wait = r.cfg.Backoff // errors: do not spin on them
					break
				}
				if next := ts.Next(); !next.IsZero() {
					wait = min(wait, max(next.Sub(ts.Now), time.Millisecond))
				}
			}
		}
		waitWake(ctx, r.timerWake, wait)
	}
	return nil
}

// fireDue moves the due groups' runs and fires the due schedules; ok
// false when none of them succeeded. It returns only storage.ErrFenced.
func (r *Engine) fireDue(ctx context.Context, lease *leader.Lease, ts storage.TimerState) (ok bool, err error) {
	if len(ts.Groups) > 0 {
		for i, x := range r.st.DueBatch(ctx, lease.Fence(), ts.Groups) {
			switch {
			case x.Err != nil:
				if r.timerFailed(ctx, x.Err, "timer: moving due runs failed", "group", ts.Groups[i]) {
					return false, x.Err
				}
			default:
				ok = true
				r.m.due.Add(float64(x.Moved))
				r.m.retried.Add(float64(x.Retried))
				if x.Woken {
					r.m.woken.Inc()
				}
			}
		}
	}
	if len(ts.Schedules) > 0 {
		fired, err := r.fireSchedules(ctx, lease, ts.Schedules, ts.Now)
		return ok || fired, err
	}
	return ok, nil
}

// fireSchedules fires the due ticks of the named schedules (one read,
// one pipeline of fenced fire_schedule scripts: storage.FireSchedules);
// ok false when none moved on. It returns only storage.ErrFenced.
func (r *Engine) fireSchedules(ctx context.Context, lease *leader.Lease, names []string, now time.Time) (ok bool, err error) {
	for _, x := range r.st.FireSchedules(ctx, lease.Fence(), names, now) {
		switch {
		case x.Err != nil:
			if r.timerFailed(ctx, x.Err, "timer: firing a schedule failed", "schedule", x.Name) {
				return false, x.Err
			}
		default:
			if x.Missed > 0 {
				r.m.fired.WithLabelValues("missed").Add(float64(x.Missed))
				r.log.Info("schedule: ticks missed while no leader ran; submitting the latest", "schedule", x.Name,
					"missed", x.Missed, "tick", x.Tick)
			}
			if x.Outcome == "submitted" || x.Outcome == "exists" {
				r.m.fired.WithLabelValues(x.Outcome).Inc()
			}
			ok = ok || x.Outcome != "gone"
		}
	}
	return ok, nil
}

// timerFailed handles a timer script's error: true when the host was
// fenced (the caller ends its term's work), else it is logged.
func (r *Engine) timerFailed(ctx context.Context, err error, msg string, args ...any) bool {
	if errors.Is(err, storage.ErrFenced) {
		r.m.fenced.WithLabelValues(r.m.ns, "timer").Inc()
		return true
	}
	if ctx.Err() == nil {
		r.log.Warn(msg, append(args, "err", err)...)
	}
	return false
}
