package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// SlotManager is the leader task that gives LAUNCHED runs their slots: in
// seq order, each run all of its k slots or none
// (storage.Store.AllocateBackfill, fenced: up to allocChunk runs per
// script). A run that does not fit is passed over and younger runs that fit
// take slots (backfill: one big run does not stop the namespace) until it
// has waited SlotGuard; then the pass stops at it and the slots freed from
// then on are held for it, so a big run is never starved by a stream of
// small ones (RATIONALE.md "Slots: backfill with a guard").
//
// Most launches never come here: the apply that launches a run places it
// on free slots itself when none waits in the LAUNCHED queue
// (storage.Decision.NoPlace). The slot manager serves the queue: it is
// woken by the coordinator when an apply queued launches and, while the
// oldest queued run waits for slots, by the namespace's work-events (a
// finished run, a worker's new slots), looking again every SlotInterval
// meanwhile; with the queue empty it waits a PollInterval.
type SlotManager struct {
	rt          *Engine
	lastPass    atomic.Int64
	waiting     atomic.Bool   // the last pass left a run that does not fit
	holding     atomic.Bool   // ... and held the slots for it (logged once per episode)
	backfilling atomic.Bool   // ... and let younger runs past it (logged once per episode)
	wake        chan struct{} // the coordinator queued launches, or slots were freed while waiting

	// While a held run blocks the queue (nothing placed), the pass is
	// retried only when the free-slot count grew, or after a SlotInterval
	// (one ZCARD instead of an allocate script per wake-up).
	mu          sync.Mutex
	unfit       map[string]time.Time // LAUNCHED runs needing more than every live worker has: since
	live        int                  // slots of live workers, read at liveAt
	liveAt      time.Time
	blockedHead string
	blockedFree int64
	blockedAt   time.Time
}

// allocChunk is the most runs one AllocateBatch script places (bounds the
// time Redis spends in one script: 128 took up to 5.8 ms on the 100,000
// delayed-runs bench, 64 keeps it near 3;
// BENCHMARKS.md "Runs in time").
const allocChunk = 64

// LastPass is when the last pass ended (zero before the first).
func (s *SlotManager) LastPass() time.Time { return unixNano(s.lastPass.Load()) }

// Run is the slot manager's LeaderTask: it passes until ctx ends, at once
// again after a pass that allocated something, else when woken, after a
// SlotInterval while a run waits for slots, or a PollInterval. It returns
// storage.ErrFenced (demotion) when an allocation is fenced.
func (s *SlotManager) Run(ctx context.Context, lease *leader.Lease) error {
	// The leader's --max-run-slots is the namespace's (0 removes a
	// predecessor's).
	if err := s.rt.st.SetMaxRunSlots(ctx, lease.Fence(), s.rt.cfg.MaxRunSlots); errors.Is(err, storage.ErrFenced) {
		s.rt.m.fenced.WithLabelValues(s.rt.m.ns, "slots").Inc()
		return err
	} else if err != nil && ctx.Err() == nil {
		s.rt.log.Warn("recording max run slots failed", "err", err)
	}
	for ctx.Err() == nil {
		n, err := s.Pass(ctx, lease)
		if errors.Is(err, storage.ErrFenced) {
			s.rt.m.fenced.WithLabelValues(s.rt.m.ns, "slots").Inc()
			s.rt.log.Warn("allocation fenced: no longer the leader", "epoch", lease.Epoch(), "err", err)
			return err
		}
		if err != nil && ctx.Err() == nil {
			s.rt.log.Warn("slot manager pass failed", "err", err)
		}
		if n == 0 {
			wait := s.rt.cfg.PollInterval
			if s.waiting.Load() {
				wait = s.rt.cfg.SlotInterval
			}
			waitWake(ctx, s.wake, wait)
		}
	}
	return nil
}

func (s *SlotManager) outcome(o string) {
	s.rt.m.allocations.WithLabelValues(s.rt.m.ns, o).Inc()
	s.rt.count("allocations." + o)
}

// Pass allocates slots to LAUNCHED runs in seq order, past the ones that
// do not fit, up to one held by the guard. It returns the number of runs
// made RUNNING.
func (s *SlotManager) Pass(ctx context.Context, lease *leader.Lease) (int, error) {
	defer func() {
		now := time.Now()
		s.lastPass.Store(now.UnixNano())
		s.rt.m.pass("slots", now)
	}()
	if !lease.Valid() {
		return 0, nil
	}
	ids, err := s.rt.st.LaunchedRuns(ctx, s.rt.cfg.BatchSize)
	if err != nil || len(ids) == 0 {
		if err == nil {
			s.waiting.Store(false) // nothing queued: nothing waits for slots
		}
		return 0, err
	}
	s.mu.Lock()
	head, free0, at := s.blockedHead, s.blockedFree, s.blockedAt
	s.blockedHead = ""
	s.mu.Unlock()
	if head == ids[0] && time.Since(at) < s.rt.cfg.SlotInterval {
		free, err := s.rt.st.FreeSlots(ctx)
		if err == nil && free <= free0 {
			s.mu.Lock()
			s.blockedHead = head // still blocked: keep the mark
			s.mu.Unlock()
			return 0, nil // nothing was freed since the head did not fit
		}
	}
	n, misfits := 0, 0
	var first, held *storage.AllocResult
	var misfit []storage.AllocResult
	defer func() { s.failUnfit(ctx, lease, misfit) }()
	defer func() {
		s.waiting.Store(misfits > 0)
		switch {
		case held != nil:
			if free, ferr := s.rt.st.FreeSlots(ctx); ferr == nil && n == 0 {
				s.mu.Lock()
				// the queue's head then: while it and the free count stay,
				// nothing can be placed (the held run and the misfits
				// before it do not fit; the rest may not pass it)
				s.blockedHead, s.blockedFree, s.blockedAt = ids[0], free, time.Now()
				s.mu.Unlock()
			}
			if !s.holding.Swap(true) {
				s.rt.log.Info("holding freed slots for a launched run that waited past the slot guard", "run", held.Run,
					"needs", held.Needed, "free", held.Found, "guard", s.rt.cfg.SlotGuard)
			}
		case first != nil:
			s.holding.Store(false)
			if !s.backfilling.Swap(true) {
				s.rt.log.Info("a launched run does not fit; younger runs that fit take slots first until it waited the slot guard",
					"run", first.Run, "needs", first.Needed, "free", first.Found, "guard", s.rt.cfg.SlotGuard)
			}
		default:
			s.holding.Store(false)
			s.backfilling.Store(false)
		}
	}()
	full := false // a misfit found no free slot: nothing younger can fit
	for lo := 0; lo < len(ids) && held == nil && !full; lo += allocChunk {
		if !lease.Valid() {
			return n, nil
		}
		chunk := ids[lo:min(lo+allocChunk, len(ids))]
		res, err := s.rt.st.AllocateBackfill(ctx, lease.Fence(), chunk, s.rt.cfg.SlotGuard)
		switch {
		case errors.Is(err, storage.ErrFenced):
			return n, err
		case err != nil && ctx.Err() != nil:
			return n, nil
		case err != nil:
			s.outcome("error")
			return n, err
		}
		for i := range res {
			r := &res[i]
			switch r.Outcome {
			case storage.AllocAllocated:
				n++
				s.rt.restore.assigned()
				s.outcome("allocated")
				s.rt.log.Debug("slots allocated", "run", r.Run, "slots", len(r.Assignments))
			case storage.AllocSkipped:
				// stopped or finished since the read: no longer ours to place
				s.outcome("skipped")
			case storage.AllocNoSlots:
				s.outcome("no_slots")
				misfits++
				misfit = append(misfit, *r)
				if first == nil {
					first = r
				}
				if r.Held {
					held = r
				}
				full = full || r.Found == 0
			}
		}
	}
	return n, nil
}

// failUnfit fails the LAUNCHED runs that have needed more slots than every
// live worker has together for UnfitTimeout: they can never fit, and would
// otherwise wait for good. A run that fits again (a worker joined) starts
// over.
func (s *SlotManager) failUnfit(ctx context.Context, lease *leader.Lease, misfit []storage.AllocResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(misfit) == 0 {
		if len(s.unfit) > 0 {
			s.unfit = nil
		}
		return
	}
	if time.Since(s.liveAt) >= s.rt.cfg.SlotInterval {
		live, err := s.rt.st.LiveSlots(ctx)
		if err != nil {
			return
		}
		s.live, s.liveAt = live, time.Now()
	}
	now := time.Now()
	still := map[string]time.Time{}
	for _, r := range misfit {
		if r.Needed <= s.live {
			continue
		}
		since, ok := s.unfit[r.Run]
		if !ok {
			since = now
		}
		if now.Sub(since) < s.rt.cfg.UnfitTimeout || !lease.Valid() {
			still[r.Run] = since
			continue
		}
		reason := fmt.Sprintf("needs %d slots; all live workers together have %d, for longer than %v: it can never fit", r.Needed, s.live, s.rt.cfg.UnfitTimeout)
		switch err := s.rt.st.FailRun(ctx, lease.Fence(), r.Run, reason); {
		case err == nil:
			s.outcome("unfit")
			s.rt.log.Warn("failed a launched run that can never fit", "run", r.Run, "needs", r.Needed, "live_slots", s.live)
		case errors.Is(err, storage.ErrBadState), errors.Is(err, storage.ErrNotFound):
			// finished or stopped meanwhile
		default:
			still[r.Run] = since // retried next pass (a fenced write ends the term elsewhere)
			s.rt.log.Warn("failing a launched run that can never fit failed", "run", r.Run, "err", err)
		}
	}
	s.unfit = still
}
