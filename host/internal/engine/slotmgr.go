package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// SlotManager is the leader task that gives LAUNCHED runs their slots: in
// seq order, each run all of its k slots or none
// (storage.Store.AllocatePass, fenced: up to storage.AllocChunk runs per
// script, the scripts of a pass pipelined in one round trip). A run that does not fit is passed over and younger runs that fit
// take slots (backfill: one big run does not stop the namespace) until it
// has waited SlotGuard; then the pass stops at it and the slots freed from
// then on are held for it, so a big run is never starved by a stream of
// small ones (RATIONALE.md "Why backfill with a guard?").
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
	placing     atomic.Int32  // a placement (abi.ParamPlacement) sends every launch through a pass: 0 not read this term, 1 no, 2 yes
	wake        chan struct{} // the coordinator queued launches, or slots were freed while waiting
	freed       atomic.Int64  // work events while waiting (a finished run, a worker's slots): counted before the wake
	full        bool          // the last pass found launched runs and no free slot (Run's goroutine only)

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

	alloc  allocState // the allocation policy's inputs and fallback (allocation.go); under passMu
	passMu sync.Mutex // one pass at a time (Run makes them one after another; a caller of Pass may not)
}

// waitWoken waits for a wake (true), the timer or ctx (false).
func waitWoken(ctx context.Context, wake <-chan struct{}, timer <-chan time.Time) bool {
	select {
	case <-wake:
		return ctx.Err() == nil
	case <-ctx.Done():
	case <-timer:
	}
	return false
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

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
	defer s.releaseAllocation()
	for ctx.Err() == nil {
		freedSeen := s.freed.Load()
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
			timer := time.NewTimer(wait) // one deadline for the whole wait
			for waitWoken(ctx, s.wake, timer.C) {
				// Woken by the coordinator's queued launches while the last
				// pass saw every slot taken: nothing can be placed until a
				// slot frees (a work event) or the timer says look again.
				if f := s.freed.Load(); f != freedSeen || !s.full {
					break
				}
			}
			timer.Stop()
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
	s.passMu.Lock()
	defer s.passMu.Unlock()
	s.full = false
	if !lease.Valid() {
		return 0, nil
	}
	if blocked, err := s.stillBlocked(ctx); blocked || err != nil {
		return 0, err
	}
	view, ok, err := s.readQueue(ctx)
	if !ok || err != nil {
		return 0, err
	}
	ids, slots, err := s.allocationOrder(ctx, &view)
	if err != nil {
		return 0, err
	}
	p := &placement{queueHead: view.Launched[0], left: len(view.Launched) > len(ids)} // left: the policy held some back, look again soon
	defer func() { s.failUnfit(ctx, lease, p.misfit) }()
	defer s.settle(ctx, p)
	err = s.place(ctx, lease, ids, slots, view.Free, p)
	return p.n, err
}

// placement is what one pass's placing did, for settle.
type placement struct {
	queueHead   string
	left        bool // the allocation order held some launched runs back
	n, misfits  int
	first, held *storage.AllocResult
	misfit      []storage.AllocResult
	full        bool // a misfit found no free slot: nothing younger can fit
	complete    bool // a pass cut short (an error, the lease) says nothing about the queue
}

// stillBlocked reports whether the run the last pass could not place is
// still the queue's head and no slot was freed since: then a pass would
// place nothing.
func (s *SlotManager) stillBlocked(ctx context.Context) (bool, error) {
	s.mu.Lock()
	head, free0, at := s.blockedHead, s.blockedFree, s.blockedAt
	s.blockedHead = ""
	s.mu.Unlock()
	if head == "" || time.Since(at) >= s.rt.cfg.SlotInterval {
		return false, nil
	}
	first, err := s.rt.st.LaunchedRuns(ctx, 1)
	if err != nil {
		return false, err
	}
	if len(first) == 1 && first[0] == head {
		if free, err := s.rt.st.FreeSlots(ctx); err == nil && free <= free0 {
			s.mu.Lock()
			s.blockedHead = head // still blocked: keep the mark
			s.mu.Unlock()
			return true, nil // nothing was freed since the held run did not fit
		}
	}
	return false, nil
}

// readQueue reads the launched runs a pass may place and the free slots
// (and the allocation settings when they may have changed); ok is false
// when there is nothing to place.
func (s *SlotManager) readQueue(ctx context.Context) (view storage.AllocationView, ok bool, err error) {
	k := limits.MaxAllocWindow
	if s.alloc.free >= 0 && (s.alloc.info != nil || s.alloc.inPlace) { // (an order in place needs no more than the runs that can fit)
		k = storage.AllocWindow(s.alloc.free)
	}
	// the settings only when the policy generation moved (namespace set
	// bumps it) or every allocSettingsRecheck (a missed message)
	gen := s.rt.set.Generation()
	withSettings := s.alloc.setAt.IsZero() || gen != s.alloc.setGen || time.Since(s.alloc.setAt) >= allocSettingsRecheck ||
		s.alloc.settings.Placement() != "" // (a placement reads the workers' profiles and free slots with them)
	view, err = s.rt.st.AllocationState(ctx, min(k, max(1, s.rt.cfg.BatchSize/2)), withSettings)
	if err != nil {
		return view, false, err
	}
	if view.SettingsRead {
		s.alloc.settings, s.alloc.setGen, s.alloc.setAt = view.Settings, gen, time.Now()
		s.placing.Store(1 + btoi(view.Settings.Placement() != ""))
	} else {
		view.Settings = s.alloc.settings
	}
	if len(view.Launched) == 0 {
		s.waiting.Store(false) // nothing queued: nothing waits for slots
		return view, false, nil
	}
	s.alloc.free = view.Free
	if view.Free == 0 {
		// Nothing can be placed: no policy call, no script. A finished
		// run or a new worker wakes the next pass; an order made now
		// would be stale by then (and give a slot freed meanwhile to the
		// run it put first for a full namespace).
		s.waiting.Store(true)
		s.full = true
		return view, false, nil
	}
	return view, true, nil
}

// place allocates ids in order, in round trips of AllocatePass calls,
// until they run out, a run is held for the slot guard, or a misfit found
// no free slot.
func (s *SlotManager) place(ctx context.Context, lease *leader.Lease, ids []string, slots map[string][]string, free int, p *placement) error {
	for lo := 0; lo < len(ids) && p.held == nil && !p.full; {
		if !lease.Valid() {
			return nil
		}
		// One round trip for the runs that can take the free slots (and
		// a chunk more, for the misfits passed over), in calls of
		// AllocChunk: a call after one that stopped places nothing
		// (storage.AllocatePass). Runs left after that go in the next.
		hi := min(len(ids), lo+max(storage.AllocChunk, roundUp(free+storage.AllocChunk, storage.AllocChunk)))
		res, err := s.rt.st.AllocatePass(ctx, lease.Fence(), ids[lo:hi], storage.AllocChunk, s.rt.cfg.SlotGuard, slots)
		lo = hi
		for i := range res {
			s.placed(&res[i], p)
		}
		switch {
		case errors.Is(err, storage.ErrFenced):
			return err
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			s.outcome("error")
			return err
		}
	}
	p.complete = true
	return nil
}

// placed counts one allocation result.
func (s *SlotManager) placed(r *storage.AllocResult, p *placement) {
	switch r.Outcome {
	case storage.AllocAllocated:
		p.n++
		s.rt.restore.assigned()
		s.outcome("allocated")
		s.rt.log.Debug("slots allocated", "run", r.Run, "slots", len(r.Assignments))
	case storage.AllocSkipped:
		// stopped or finished since the read: no longer ours to place
		s.outcome("skipped")
	case storage.AllocNoSlots:
		s.outcome("no_slots")
		p.misfits++
		if r.Found > 0 && !s.alloc.inPlace { // (fifo in place is launch order already)
			if s.alloc.short == nil {
				s.alloc.short = map[string]struct{}{}
			}
			s.alloc.short[r.Run] = struct{}{}
		}
		p.misfit = append(p.misfit, *r)
		if p.first == nil {
			p.first = r
		}
		if r.Held {
			p.held = r
		}
		p.full = p.full || r.Found == 0
	}
}

// settle records what a pass left: whether runs wait for slots (the
// coordinator places launches itself only while nothing waits), the
// blocked head, and the hold and backfill notices.
func (s *SlotManager) settle(ctx context.Context, p *placement) {
	if p.complete || p.misfits > 0 {
		s.waiting.Store(p.misfits > 0 || p.left)
	}
	switch {
	case p.held != nil:
		if free, ferr := s.rt.st.FreeSlots(ctx); ferr == nil && p.n == 0 {
			s.mu.Lock()
			// the queue's head then: while it and the free count stay,
			// nothing can be placed (the held run and the misfits
			// before it do not fit; the rest may not pass it)
			s.blockedHead, s.blockedFree, s.blockedAt = p.queueHead, free, time.Now()
			s.mu.Unlock()
		}
		if !s.holding.Swap(true) {
			s.rt.log.Info("holding freed slots for a launched run that waited past the slot guard", "run", p.held.Run,
				"needs", p.held.Needed, "free", p.held.Found, "guard", s.rt.cfg.SlotGuard)
		}
	case p.first != nil:
		s.holding.Store(false)
		if !s.backfilling.Swap(true) {
			s.rt.log.Info("a launched run does not fit; younger runs that fit take slots first until it waited the slot guard",
				"run", p.first.Run, "needs", p.first.Needed, "free", p.first.Found, "guard", s.rt.cfg.SlotGuard)
		}
	default:
		s.holding.Store(false)
		s.backfilling.Store(false)
	}
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
	var err error
	if time.Since(s.liveAt) >= s.rt.cfg.SlotInterval {
		live, err := s.rt.st.LiveSlots(ctx)
		if err != nil {
			return
		}
		s.live, s.liveAt = live, time.Now()
	}
	var caps []storage.WorkerCapacity // read only when a misfit has requirements
	for _, r := range misfit {
		if len(r.Require) > 0 || r.SameWorker {
			if caps, err = s.rt.st.LiveCapacity(ctx); err != nil {
				return
			}
			break
		}
	}
	now := time.Now()
	still := map[string]time.Time{}
	for _, r := range misfit {
		reason := fmt.Sprintf("needs %d slots; all live workers together have %d, for longer than %v: it can never fit", r.Needed, s.live, s.rt.cfg.UnfitTimeout)
		if len(r.Require) > 0 || r.SameWorker {
			// placement: only the slots of live workers that serve its
			// group and carry its requirements count (same worker: of
			// one of them)
			can := 0
			for _, c := range caps {
				if c.Placement.Serves(r.Group) && c.Placement.Carries(r.Require) {
					if r.SameWorker {
						can = max(can, c.Slots)
					} else {
						can += c.Slots
					}
				}
			}
			if r.Needed <= can {
				continue
			}
			reason = fmt.Sprintf("needs %d slot(s) on workers with %s (its requirements); the live workers with them have %d, for longer than %v: it can never fit",
				r.Needed, labelsText(r.Require), can, s.rt.cfg.UnfitTimeout)
			if r.SameWorker {
				reason = fmt.Sprintf("needs %d slot(s) on one worker; the largest live worker that may take it has %d, for longer than %v: it can never fit",
					r.Needed, can, s.rt.cfg.UnfitTimeout)
			}
		} else if r.Needed <= s.live {
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

// labelsText is "k=v, k=v".
func labelsText(ls []abi.Label) string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Key+"="+l.Value)
	}
	return strings.Join(out, ", ")
}

// placingNow reports whether the namespace has a placement (every launch
// goes through a pass): what the slot manager's last read of the settings
// said, or, before its first read of a term, the settings read now (once a
// term: a leader that just took over places no launch before it knows).
func (s *SlotManager) placingNow(ctx context.Context) bool {
	v := s.placing.Load()
	if v == 0 {
		a, err := s.rt.st.Allocation(ctx)
		if err != nil {
			return false // (the slot manager's pass reads it again)
		}
		s.placing.CompareAndSwap(0, 1+btoi(a.Placement() != ""))
		v = s.placing.Load()
	}
	return v == 2
}

func btoi(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
