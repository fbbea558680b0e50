package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// SlotManager is the leader task that gives LAUNCHED runs their slots:
// strictly FIFO by seq, each run all of its k slots or none
// (storage.Store.AllocateBatch, fenced: up to allocChunk runs per script). When the oldest run does not fit, the
// pass stops: younger (smaller) runs do not overtake it, so a big run is
// never starved by a stream of small ones (RATIONALE.md "Slot manager is
// strictly FIFO").
//
// Most launches never come here: the apply that launches a run places it
// on free slots itself when none waits in the LAUNCHED queue
// (storage.Decision.NoPlace). The slot manager serves the queue: it is
// woken by the coordinator when an apply queued launches and, while the
// oldest queued run waits for slots, by the namespace's work-events (a
// finished run, a worker's new slots), looking again every SlotInterval
// meanwhile; with the queue empty it waits a PollInterval.
type SlotManager struct {
	rt       *Engine
	lastPass atomic.Int64
	waiting  atomic.Bool   // the last pass stopped on ErrNoSlots
	wake     chan struct{} // the coordinator queued launches, or slots were freed while waiting

	// After ErrNoSlots the head run is retried only when the free-slot
	// count grew, or after a SlotInterval (one ZCARD instead of an
	// allocate script per wake-up).
	mu          sync.Mutex
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

// Pass allocates slots to LAUNCHED runs in seq order until one does not
// fit. It returns the number of runs made RUNNING.
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
	n := 0
	for lo := 0; lo < len(ids); lo += allocChunk {
		if !lease.Valid() {
			return n, nil
		}
		chunk := ids[lo:min(lo+allocChunk, len(ids))]
		res, err := s.rt.st.AllocateBatch(ctx, lease.Fence(), chunk)
		switch {
		case errors.Is(err, storage.ErrFenced):
			return n, err
		case err != nil && ctx.Err() != nil:
			return n, nil
		case err != nil:
			s.outcome("error")
			return n, err
		}
		for _, r := range res {
			switch r.Outcome {
			case storage.AllocAllocated:
				n++
				s.rt.restore.assigned()
				s.outcome("allocated")
				s.rt.log.Debug("slots allocated", "run", r.Run, "slots", len(r.Assignments))
				s.waiting.Store(false)
			case storage.AllocSkipped:
				// stopped or finished since the read: no longer ours to place
				s.outcome("skipped")
			case storage.AllocNoSlots:
				s.outcome("no_slots")
				if free, ferr := s.rt.st.FreeSlots(ctx); ferr == nil {
					s.mu.Lock()
					s.blockedHead, s.blockedFree, s.blockedAt = r.Run, free, time.Now()
					s.mu.Unlock()
				}
				if !s.waiting.Swap(true) {
					s.rt.log.Info("not enough free slots; the oldest launched run waits (FIFO)", "run", r.Run,
						"needs", r.Needed, "free", r.Found)
				}
				return n, nil
			}
		}
	}
	return n, nil
}
