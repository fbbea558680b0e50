package worker

import (
	"context"
	"errors"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// record books a finished execution (pending report unless dropped) and
// reports whether it has something to report.
func (w *agent) record(f *finished) bool {
	w.mu.Lock()
	delete(w.running, f.token)
	w.mem.finish(f)
	outcome := string(f.outcome)
	if f.drop {
		outcome = "DROPPED"
		w.endSpans(f, "dropped", nil) // the assignment was gone: not reported
	} else {
		w.pending[f.token] = f
	}
	w.mu.Unlock()
	w.runsDone.WithLabelValues(outcome).Inc()
	w.Logger.Info("run finished", "run", f.run, "token", f.token, "outcome", outcome, "reason", f.reason)
	return !f.drop
}

// kickReports asks the reporter to send the pending reports (it never
// blocks: a kick already queued covers this one).
func (w *agent) kickReports() {
	select {
	case w.reportKick <- struct{}{}:
	default:
	}
}

// reporter sends the pending reports whenever kicked (a run finished, a
// heartbeat landed, a poll settled something), until ctx ends. It runs
// beside the main loop so that a report that blocks (its master died
// with it in flight, a WAIT no replica answers) never delays a heartbeat:
// a worker whose heartbeats waited behind a report retry was taken for
// dead by a new leader after a Redis failover, and its runs were run
// again elsewhere (issue 53).
func (w *agent) reporter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.reportKick:
		}
		w.retryReports(ctx)
		select {
		case w.reported <- struct{}{}:
		default:
		}
	}
}

// retryReports sends every pending report; transient failures stay
// pending for the next kick (the next heartbeat that lands).
func (w *agent) retryReports(ctx context.Context) {
	w.reportMu.Lock()
	defer w.reportMu.Unlock()
	w.mu.Lock()
	todo := make([]finished, 0, len(w.pending))
	for _, p := range w.pending {
		todo = append(todo, *p)
	}
	current := w.identity
	w.mu.Unlock()
	// Reports with a known group go in one pipeline per identity they ran
	// under (storage.ReportBatch, errors per run; nearly always one: the
	// current); the others read the run's group first.
	errs := make([]error, len(todo))
	type batch struct {
		reqs []storage.ReportReq
		pos  []int
	}
	var batches map[string]*batch
	for i := range todo {
		p := &todo[i]
		if p.identity == "" {
			p.identity = current
		}
		if p.group == "" {
			errs[i] = w.Store.Report(ctx, p.identity, p.run, p.token, p.outcome, p.reason)
			continue
		}
		if batches == nil {
			batches = map[string]*batch{}
		}
		b := batches[p.identity]
		if b == nil {
			b = &batch{}
			batches[p.identity] = b
		}
		b.reqs = append(b.reqs, storage.ReportReq{Group: p.group, Run: p.run, Token: p.token, Outcome: p.outcome, Reason: p.reason,
			Result: p.result, Output: p.output, ExitCode: p.exitCode})
		b.pos = append(b.pos, i)
	}
	for id, b := range batches {
		for j, err := range w.Store.ReportBatch(ctx, id, b.reqs) {
			errs[b.pos[j]] = err
		}
	}
	for i, p := range todo {
		err := errs[i]
		how := "written"
		switch {
		case err == nil:
			w.Logger.Info("run reported", "run", p.run, "token", p.token, "outcome", p.outcome)
		case errors.Is(err, storage.ErrNotFound):
			// The run is gone from the store after this worker ran it: Redis
			// lost it (a failover to a replica that missed the submit or
			// the launch). Surface it, do not drop it silently.
			lerr := w.Store.NoteLost(ctx, storage.LostRun{Run: p.run, Token: p.token, Outcome: p.outcome, Worker: p.identity, Reason: p.reason})
			if lerr != nil && ctx.Err() == nil {
				w.Logger.Warn("keeping the report of a lost run failed; will retry", "run", p.run, "err", lerr)
				continue
			}
			w.rollback.WithLabelValues("lost").Inc()
			w.Logger.Error("run executed here is gone from the store (Redis lost it); kept in the namespace's lost list (wasmsched lost)",
				"run", p.run, "token", p.token, "outcome", p.outcome)
			how = "lost"
		case errors.Is(err, storage.ErrNotOwner), errors.Is(err, storage.ErrUnknownWorker), errors.Is(err, storage.ErrInvalid):
			w.Logger.Warn("report refused; dropping it", "run", p.run, "token", p.token, "outcome", p.outcome, "err", err)
			how = "refused"
		case errors.Is(err, storage.ErrBadState):
			// Most likely a stop request raced the end of the run: the next
			// heartbeat shows STOPPING and turns the report into STOPPED.
			w.Logger.Warn("report refused by run state; will retry", "run", p.run, "outcome", p.outcome, "err", err)
			continue
		default:
			if ctx.Err() == nil {
				w.Logger.Warn("report failed; will retry", "run", p.run, "err", err)
			}
			continue
		}
		w.mu.Lock()
		settled := false
		if cur := w.pending[p.token]; cur != nil && cur.outcome == p.outcome {
			delete(w.pending, p.token)
			w.mem.reported(p.token, time.Now()) // done with, as far as this worker knows
			settled = true
		}
		w.mu.Unlock()
		if settled {
			w.endSpans(&p, how, err)
		}
	}
}

// dropAll kills every execution without reporting (the worker lost its
// slots: they may be reassigned). The outcomes of executions that had
// finished stay pending: they are reported under the identity they ran
// with, and land while their run's assignment still names it (the restore
// has not given the run to another worker yet); dropping them made a run
// that had finished run again (a worker reaped while Redis refused its
// heartbeats at maxmemory).
func (w *agent) dropAll(why string) {
	w.mu.Lock()
	for _, e := range w.running {
		e.kill(killDrop)
	}
	running := len(w.running)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.HeartbeatTTL)
	defer cancel()
	for ; running > 0; running-- {
		f := <-w.done
		f.drop = true
		w.finish(ctx, f)
		w.noteIfGone(ctx, f)
	}
	w.Logger.Info("dropped all work", "why", why)
}

// noteIfGone keeps an execution this worker interrupted because its
// registration was gone in the namespace's lost list when its run is gone
// too: the store was wiped (FLUSHALL, a failover to an empty replica), not
// the worker reaped (then the run is restored elsewhere). operations.md
// promises every run a worker executed and the store lost is listed.
func (w *agent) noteIfGone(ctx context.Context, f *finished) {
	if _, err := w.Store.GetRun(ctx, f.run); !errors.Is(err, storage.ErrNotFound) {
		return
	}
	l := storage.LostRun{Run: f.run, Token: f.token, Outcome: storage.StateFailed, Worker: f.identity,
		Reason: "interrupted: the store no longer had the worker nor the run (wiped, or a failover to a replica without them)"}
	if err := w.Store.NoteLost(ctx, l); err != nil {
		w.Logger.Warn("keeping a run the store lost in the lost list failed", "run", f.run, "err", err)
		return
	}
	w.rollback.WithLabelValues("lost").Inc()
	w.Logger.Error("run executed here is gone from the store (Redis lost it); kept in the namespace's lost list (wasmsched lost)",
		"run", f.run, "token", f.token)
}
