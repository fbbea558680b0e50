package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// Restore outcomes (label "outcome" of wasmsched_restores_total).
const (
	RestoreKept        = "kept"        // every task slot verified and reused: same assignments and tokens
	RestoreReallocated = "reallocated" // some task slots got new slots (the rest kept)
	RestoreFailed      = "failed"      // the reuse policy failed the run (FailRun)
	RestoreNoSlots     = "no_slots"    // not enough free slots: nothing written, retried later
	RestoreStale       = "stale"       // a reused slot changed between check and apply: re-checked
	RestoreSkipped     = "skipped"     // nothing to restore (LAUNCHED without slots, finished, gone)
	RestoreError       = "error"       // policy failure or Redis error: retried later
)

// Restorer is the failover-restore leader task. At the start of every term
// it restores every active run (storage.Store.ActiveRunIDs): the recorded
// slots of a RUNNING/STOPPING run are verified inside a script
// (RestoreCheck), the slot-reuse policy decides per task slot (reuse or
// reallocate) or fails the run, and RestoreApply writes it all-or-nothing
// (re-verifying reused slots; ErrNoSlots writes nothing, the run keeps its
// retained slots and is retried). A run whose slots all verify keeps the
// same assignments and tokens: its worker never notices the failover.
// LAUNCHED runs without slots are left to the slot manager. Then, every
// RestoreInterval while slots are assigned, it reaps heartbeat-expired
// workers (storage.Store.ReapDeadWorkers, which queues the runs that held
// their slots) and restores the restore queue plus the runs still
// pending. With no slot assigned and nothing pending (a dead worker holds
// no run) it waits a PollInterval, or until runs get slots (wake).
type Restorer struct {
	rt       *Engine
	lastPass atomic.Int64
	idle     atomic.Bool   // the last pass found no assigned slot and nothing to restore
	wake     chan struct{} // runs got slots while idle

	mu      sync.Mutex
	pending map[string]bool // runs to retry (no slots, policy failure, errors)
	redoAll bool            // listing the active runs failed: RestoreAll again
}

// LastPass is when the last pass ended (zero before the first).
func (r *Restorer) LastPass() time.Time { return unixNano(r.lastPass.Load()) }

// Pending returns the number of runs waiting for a retry.
func (r *Restorer) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// Run is the restore LeaderTask. It returns storage.ErrFenced (demotion)
// when a write is fenced.
func (r *Restorer) Run(ctx context.Context, lease *leader.Lease) error {
	r.mu.Lock()
	r.pending = map[string]bool{} // a new term re-reads everything
	r.redoAll = false
	r.mu.Unlock()
	// Workers get one heartbeat TTL from the start of the term before they
	// are reaped: an outage that ended with this term (a Redis failover)
	// kept their heartbeats from landing.
	r.rt.st.SpareWorkersSince(time.Now())
	r.idle.Store(false)
	err := r.RestoreAll(ctx, lease)
	for err == nil && ctx.Err() == nil {
		wait := r.rt.cfg.RestoreInterval
		if r.idle.Load() {
			wait = r.rt.cfg.PollInterval
		}
		waitWake(ctx, r.wake, wait)
		if ctx.Err() != nil {
			break
		}
		err = r.Pass(ctx, lease)
	}
	if errors.Is(err, storage.ErrFenced) {
		r.rt.m.fenced.WithLabelValues(r.rt.m.ns, "restore").Inc()
		r.rt.log.Warn("restore fenced: no longer the leader", "epoch", lease.Epoch(), "err", err)
		return err
	}
	return nil
}

// RestoreAll restores every active run (what a new leader does first).
func (r *Restorer) RestoreAll(ctx context.Context, lease *leader.Lease) error {
	defer r.mark()
	if !lease.Valid() {
		return nil
	}
	ids, err := r.rt.st.ActiveRunIDs(ctx)
	if err != nil {
		r.rt.log.Warn("restore: listing active runs failed; retrying in the next pass", "err", err)
		r.mu.Lock()
		r.redoAll = true
		r.mu.Unlock()
		return nil
	}
	queued, err := r.rt.st.RestoreQueue(ctx, 0)
	if err != nil {
		r.rt.log.Warn("restore: reading the restore queue failed", "err", err)
	}
	ids = union(ids, queued)
	if len(ids) > 0 {
		r.rt.log.Info("restoring active runs after taking over", "epoch", lease.Epoch(), "runs", len(ids))
	}
	return r.restoreRuns(ctx, lease, ids)
}

// assigned tells an idle restore task that runs got slots (a dead worker
// may now hold one): it goes back to its RestoreInterval.
func (r *Restorer) assigned() {
	if r.idle.Load() {
		wakeUp(r.wake)
	}
}

// Pass reaps dead workers and restores the restore queue and the pending runs.
func (r *Restorer) Pass(ctx context.Context, lease *leader.Lease) error {
	defer r.mark()
	if !lease.Valid() {
		return nil
	}
	r.mu.Lock()
	redo := r.redoAll
	r.redoAll = false
	r.mu.Unlock()
	if redo {
		if err := r.RestoreAll(ctx, lease); err != nil {
			return err
		}
	}
	rp, err := r.rt.st.ReapDeadWorkers(ctx, lease.Fence())
	reaped, affected := rp.Workers, rp.Affected
	readOK := err == nil
	switch {
	case errors.Is(err, storage.ErrFenced):
		return err
	case err != nil:
		if ctx.Err() == nil {
			r.rt.log.Warn("reaping dead workers failed", "err", err)
		}
	case len(reaped) > 0:
		r.rt.log.Warn("reaped dead workers", "workers", reaped, "affected_runs", affected)
	}
	queued, err := r.rt.st.RestoreQueue(ctx, 0)
	if err != nil {
		readOK = false
		if ctx.Err() == nil {
			r.rt.log.Warn("reading the restore queue failed", "err", err)
		}
	}
	r.mu.Lock()
	for id := range r.pending {
		queued = append(queued, id)
	}
	r.mu.Unlock()
	err = r.restoreRuns(ctx, lease, union(queued, nil))
	// Idle: no slot was assigned, so no dead worker can hold a run, and
	// nothing was queued or is pending (a failed read is not idle).
	r.mu.Lock()
	left := len(r.pending)
	r.mu.Unlock()
	r.idle.Store(readOK && rp.Assigned == 0 && len(queued) == 0 && left == 0)
	return err
}

func (r *Restorer) mark() {
	now := time.Now()
	r.lastPass.Store(now.UnixNano())
	r.rt.m.pass("restore", now)
}

func union(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, l := range [][]string{a, b} {
		for _, id := range l {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// restoreWidth is how many runs the failover restore restores at once at
// least (EngineConfig.Coordinators when more): each run is its own reuse
// decision and round trip, so they overlap (unlike the coordinator's
// batches, which are pipelined already).
const restoreWidth = 8

func (r *Restorer) restoreRuns(ctx context.Context, lease *leader.Lease, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return forEach(ctx, max(r.rt.cfg.Coordinators, restoreWidth), ids, func(ctx context.Context, id string) error {
		oc, err := r.RestoreRun(ctx, lease, id)
		r.mu.Lock()
		if oc == RestoreNoSlots || oc == RestoreError {
			if r.pending == nil {
				r.pending = map[string]bool{}
			}
			r.pending[id] = true
		} else {
			delete(r.pending, id)
		}
		r.mu.Unlock()
		return err
	})
}

func (r *Restorer) outcome(o string) {
	r.rt.m.restores.WithLabelValues(r.rt.m.ns, o).Inc()
	r.rt.count("restores." + o)
}

// RestoreRun restores one run and returns the outcome. It returns an error
// only for storage.ErrFenced and ctx errors; other failures are logged and
// reported as RestoreError (retry later).
func (r *Restorer) RestoreRun(ctx context.Context, lease *leader.Lease, id string) (string, error) {
	log := r.rt.log.With("run", id)
	for attempt := 0; ; attempt++ {
		oc, err := r.restoreOnce(ctx, lease, id)
		if oc == RestoreStale && attempt < 3 && err == nil {
			r.outcome(oc)
			r.rt.m.stale.WithLabelValues(r.rt.m.ns, "restore").Inc()
			log.Warn("restore stale: a reused slot changed since the check; checking again")
			continue
		}
		if oc == RestoreStale { // keeps changing: try in a later pass
			oc = RestoreError
		}
		r.outcome(oc)
		return oc, err
	}
}

func (r *Restorer) restoreOnce(ctx context.Context, lease *leader.Lease, id string) (string, error) {
	log := r.rt.log.With("run", id)
	rc, err := r.rt.st.RestoreCheck(ctx, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return RestoreSkipped, nil
	case err != nil:
		if ctx.Err() != nil {
			return RestoreError, ctx.Err()
		}
		log.Warn("restore check failed", "err", err)
		return RestoreError, nil
	}
	run := rc.Run
	if run.State != storage.StateRunning && run.State != storage.StateStopping {
		// LAUNCHED runs get their slots from the slot manager; final runs are done.
		return RestoreSkipped, nil
	}
	if run.State == storage.StateRunning && run.Timeout > 0 && !run.StartedAt.IsZero() && time.Since(run.StartedAt) > run.Timeout {
		// Its worker is gone and its timeout has passed: the leader
		// enforces it (a retry if attempts are left).
		return r.failRun(ctx, lease, log, id, "timeout", "", storage.TimedOutReason(run.Timeout)+" (enforced by the leader: its worker is gone)")
	}
	k := max(run.Slots, 1)
	ar, _ := toABIRun(run) // RUNNING or STOPPING: checked above
	req := &abi.ReuseRequest{Group: run.Group, Now: time.Now().UnixMilli(), Run: ar}
	for _, s := range rc.Slots {
		if s.Task < 0 || s.Task >= k {
			continue
		}
		req.Slots = append(req.Slots, abi.TaskSlot{Task: uint32(s.Task), Worker: s.Worker, Index: uint32(max(s.Slot, 0)),
			Token: s.Token, Alive: s.Alive, Held: s.Held})
	}
	name := r.rt.cfg.ReusePolicy
	ref, err := r.rt.set.Acquire(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			return RestoreError, ctx.Err()
		}
		log.Warn("slot-reuse policy unavailable; run retried later", "policy", name, "err", err)
		return RestoreError, nil
	}
	t0 := time.Now()
	dec, err := ref.Policy.DecideReuse(ctx, req)
	r.rt.m.call(name, "slot-reuse", time.Since(t0))
	ver := ref.Version
	ref.Release()
	if err != nil {
		if ctx.Err() != nil {
			return RestoreError, ctx.Err()
		}
		log.Warn("slot-reuse decision rejected; run retried later", "policy", name, "version", ver,
			"outcome", policyOutcome(err), "err", err)
		return RestoreError, nil
	}
	if !lease.Valid() {
		return RestoreError, nil
	}
	if dec.Fail {
		return r.failRun(ctx, lease, log, id, name, ver, dec.Reason)
	}
	return r.applyVerdicts(ctx, lease, log, id, k, run.MaxAttempts, req, dec)
}

// failRun fails a restored run: its slot-reuse policy said so (name is the
// policy), its timeout passed ("timeout") or a run with retries lost its
// task 0 ("retry": fail_run queues the next attempt).
func (r *Restorer) failRun(ctx context.Context, lease *leader.Lease, log *slog.Logger, id, name, ver, reason string) (string, error) {
	if reason == "" {
		reason = "failed by slot-reuse policy " + name
	}
	err := r.rt.st.FailRun(ctx, lease.Fence(), id, reason)
	switch {
	case err == nil:
		log.Warn("restore: run failed", "by", name, "version", ver, "reason", reason)
		return RestoreFailed, nil
	case errors.Is(err, storage.ErrFenced):
		return RestoreError, err
	case errors.Is(err, storage.ErrBadState) || errors.Is(err, storage.ErrNotFound):
		return RestoreSkipped, nil
	default:
		log.Warn("restore: fail run failed", "err", err)
		return RestoreError, nil
	}
}

// applyVerdicts reuses the task slots the policy kept and reallocates the
// others (and the tasks without a recorded slot), all or nothing.
func (r *Restorer) applyVerdicts(ctx context.Context, lease *leader.Lease, log *slog.Logger, id string, k, maxAttempts int,
	req *abi.ReuseRequest, dec abi.ReuseDecision) (string, error) {
	var reuse, realloc []int
	covered := make([]bool, k)
	for i, s := range req.Slots {
		covered[s.Task] = true
		if i < len(dec.Verdicts) && dec.Verdicts[i] == abi.VerdictReuse {
			reuse = append(reuse, int(s.Task))
		} else {
			realloc = append(realloc, int(s.Task))
		}
	}
	for t := range k { // tasks without a recorded slot
		if !covered[t] {
			realloc = append(realloc, t)
		}
	}
	if maxAttempts > 1 && slices.Contains(realloc, 0) {
		// A run with retries whose task 0 (the execution) is lost: that
		// attempt failed; the next one goes through its backoff (or the
		// run fails when none is left), so no attempt executes twice.
		return r.failRun(ctx, lease, log, id, "retry", "", "worker lost: its task-0 slot was not verified after a failover")
	}
	as, err := r.rt.st.RestoreApply(ctx, lease.Fence(), id, reuse, realloc)
	switch {
	case err == nil:
		if len(realloc) == 0 {
			log.Debug("restore: all slots verified and reused", "slots", len(as))
			return RestoreKept, nil
		}
		log.Info("restore: slots reallocated", "reused", reuse, "reallocated", realloc, "assignments", fmtAssign(as))
		return RestoreReallocated, nil
	case errors.Is(err, storage.ErrFenced):
		return RestoreError, err
	case errors.Is(err, storage.ErrStale):
		return RestoreStale, nil
	case errors.Is(err, storage.ErrNoSlots):
		log.Warn("restore: not enough free slots; nothing written, the run keeps its slots and is retried",
			"reallocate", realloc, "err", err)
		return RestoreNoSlots, nil
	case errors.Is(err, storage.ErrBadState) || errors.Is(err, storage.ErrNotFound):
		return RestoreSkipped, nil // finished meanwhile
	case ctx.Err() != nil:
		return RestoreError, ctx.Err()
	default:
		log.Warn("restore apply failed; run retried later", "err", err)
		return RestoreError, nil
	}
}

func fmtAssign(as []storage.Assignment) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprintf("task%d=%s#%d", a.Task, a.Worker, a.Slot)
	}
	return out
}
