package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// subscribe listens on the worker's own slot-events channel
// (keyspace.Keys.SlotEvents of its identity: the leader announces there each
// task-0 slot of this worker it assigns or asks to stop:
// storage.ParseSlotEvents), queues the events naming this worker and
// returns a channel that gets a token when there are some, so the worker
// starts the run at once instead of at its next heartbeat. A new identity
// (a re-registration: register) moves the subscription to its channel. It
// listens on the shared channel of older hosts too
// (keyspace.Keys.SharedSlotEvents): workers upgrade before their hosts.
// Best effort: without the subscription (or when a message is lost) the
// heartbeat still picks the work up.
func (w *agent) subscribe(ctx context.Context) <-chan struct{} {
	kick := make(chan struct{}, 1)
	keys := keyspace.Of(w.Store)
	on := w.Identity()
	ps := w.Store.Subscribe(ctx, keys.SlotEvents(on), keys.SharedSlotEvents())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-w.relisten:
				if id == on {
					continue
				}
				// the new channel first: nothing published for the new
				// identity after this is missed (what came before, the
				// heartbeat's reconcile picks up)
				if err := ps.Subscribe(ctx, keys.SlotEvents(id)); err != nil {
					w.Logger.Debug("worker slot-events subscribe failed; the heartbeat picks the work up", "identity", id, "err", err)
				}
				if err := ps.Unsubscribe(ctx, keys.SlotEvents(on)); err != nil {
					w.Logger.Debug("worker slot-events unsubscribe failed", "identity", on, "err", err)
				}
				on = id
			case m, ok := <-ch:
				if !ok {
					return
				}
				id := w.Identity()
				n := 0
				w.mu.Lock()
				for _, e := range storage.ParseSlotEvents(m.Payload) {
					if e.Worker == id {
						w.events = append(w.events, e)
						n++
					}
				}
				w.mu.Unlock()
				if n > 0 {
					select {
					case kick <- struct{}{}:
					default: // a poll is already due
					}
				}
			}
		}
	}()
	return kick
}

// notStarted reports whether token is not yet executed or settled: the
// slots read fetches the whole run record only for such task-0 slots.
func (w *agent) notStarted(token string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.mem.seen(token)
}

// poll is the read-only pickup after slot-events notifications: the
// announced slots and their runs in one round trip (storage.PollAssigned),
// then every announced run still assigned is settled: a RUNNING one
// started, a STOPPING one stopped (settleLocked). It never drops anything
// (the full heartbeat's reconcile does) and does not extend the heartbeat
// (the ticker does).
func (w *agent) poll(ctx context.Context) {
	w.mu.Lock()
	evs := w.events
	w.events = nil
	id := w.identity
	w.mu.Unlock()
	if len(evs) == 0 {
		return
	}
	if time.Since(w.lastBeat) >= w.HeartbeatTTL {
		// Our heartbeat may have expired (a pause, a partition): the
		// leader may have reaped us and be restoring these runs
		// elsewhere. The next heartbeat says (it re-registers if so).
		return
	}
	readAt := time.Now()
	states, err := w.Store.PollAssigned(ctx, id, evs)
	if err != nil {
		if ctx.Err() == nil {
			w.Logger.Debug("worker slot poll failed; the heartbeat picks the work up", "identity", id, "err", err)
		}
		return
	}
	if w.toStart(states) && w.Store.Durable(ctx) {
		// Start nothing a failover could still take back: a write of ours
		// sent after the read, acknowledged by a replica, means the
		// assignments read before it are on the replica too (the
		// replication stream is ordered).
		if err := w.Store.ConfirmBeat(ctx, id, w.HeartbeatTTL); err != nil {
			if ctx.Err() == nil {
				w.Logger.Warn("assignments not confirmed on a replica; not starting them yet", "identity", id, "err", err)
			}
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.identity != id {
		return // re-registered meanwhile: these slots are not ours
	}
	for _, s := range states {
		w.settleLocked(ctx, s.Token, s, readAt)
	}
	if len(w.pending) > 0 {
		w.kickReports()
	}
}

// toStart reports whether states hold a RUNNING task-0 assignment this
// worker has not started.
func (w *agent) toStart(states []storage.SlotState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range states {
		if s.Task == 0 && s.RunState == storage.StateRunning && !w.mem.seen(s.Token) {
			return true
		}
	}
	return false
}

// register takes a fresh identity and registers it, retrying transient
// errors until ctx ends.
func (w *agent) register(ctx context.Context) error {
	id := storage.NewIdentity(w.Advertise)
	for {
		err := w.Store.RegisterWorkerWith(ctx, id, w.Slots, w.HeartbeatTTL, w.Placement)
		if err == nil {
			break
		}
		if errors.Is(err, storage.ErrInvalid) || ctx.Err() != nil {
			return fmt.Errorf("worker: register: %w", err)
		}
		w.Logger.Warn("worker register failed; retrying", "identity", id, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("worker: register: %w", ctx.Err())
		case <-time.After(w.HeartbeatTTL / 3):
		}
	}
	w.mu.Lock()
	w.identity = id
	w.mu.Unlock()
	// the subscriber (once it runs) moves to the new identity's channel;
	// only the latest identity matters
	select {
	case <-w.relisten:
	default:
	}
	w.relisten <- id
	w.lastBeat = time.Now()
	w.Logger.Info("worker registered", "identity", id, "slots", w.Slots, "heartbeat_ttl", w.HeartbeatTTL)
	return nil
}

// heartbeat refreshes the worker's liveness; a full one also reconciles
// executions with the assignments it returns.
func (w *agent) heartbeat(ctx context.Context, full bool) {
	id := w.Identity()
	sent := time.Now()
	var states []storage.SlotState
	var err error
	if full {
		states, err = w.Store.Heartbeat(ctx, id, w.HeartbeatTTL, w.notStarted)
	} else {
		err = w.Store.Beat(ctx, id, w.HeartbeatTTL)
	}
	if errors.Is(err, storage.ErrUnknownWorker) {
		w.Logger.Warn("worker was reaped; dropping its work and registering again", "identity", id)
		w.dropAll("worker was reaped")
		if w.draining.Load() {
			return // shutting down: nothing to register for
		}
		if err := w.register(ctx); err != nil && ctx.Err() == nil {
			w.Logger.Error("worker re-register failed", "err", err)
		}
		w.kickReports() // the outcomes it kept, under the identity they ran with
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			w.Logger.Warn("worker heartbeat failed", "identity", id, "err", err)
			// Self-fence: once our heartbeat may have expired the leader
			// may reap us and reassign our runs, so stop executing them
			// now rather than risk running a run twice at once.
			if time.Since(w.lastBeat) > w.HeartbeatTTL {
				w.mu.Lock()
				for _, e := range w.running {
					e.kill(killLost)
				}
				w.mu.Unlock()
			}
		}
		return
	}
	w.lastBeat = sent
	if full {
		w.reconcile(ctx, states, sent)
	}
	w.kickReports() // what failed before is retried after each beat that lands
}

// reconcile starts, stops and drops executions to match the assignments.
func (w *agent) reconcile(ctx context.Context, states []storage.SlotState, readAt time.Time) {
	assigned := map[string]storage.SlotState{} // task-0 assignments by token
	for _, s := range states {
		if s.Run == "" || s.Token == "" || s.Task != 0 {
			continue
		}
		assigned[s.Token] = s
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Executions whose assignment is gone: the run was reassigned or
	// finished elsewhere; kill them and do not report.
	for tok, e := range w.running {
		if _, ok := assigned[tok]; !ok {
			w.Logger.Warn("assignment gone; killing execution", "run", e.run, "token", tok)
			e.kill(killDrop)
		}
	}
	for tok, p := range w.pending {
		// (a report of an earlier identity stays until it is sent: its
		// assignment is not among this identity's slots)
		if _, ok := assigned[tok]; !ok && (p.identity == "" || p.identity == w.identity) {
			delete(w.pending, tok)
		}
	}
	// Tokens are remembered past their assignment (memory.go): a store
	// rolled back by a failover may assign one again.
	w.mem.prune(time.Now(), w.identity, func(tok string) bool {
		_, a := assigned[tok]
		return a || w.running[tok] != nil || w.pending[tok] != nil
	})
	for tok, s := range assigned {
		w.settleLocked(ctx, tok, s, readAt)
	}
}

// settleLocked makes the execution of assignment s (token tok) match its
// run's state: start a RUNNING run not started yet, stop a STOPPING one
// (or settle it STOPPED unexecuted), drop one finished elsewhere. w.mu is
// held. readAt is when the read that returned s was sent.
func (w *agent) settleLocked(ctx context.Context, tok string, s storage.SlotState, readAt time.Time) {
	switch s.RunState {
	case storage.StateStopping:
		if e := w.running[tok]; e != nil {
			if e.stopReason == "" {
				e.stopReason = w.stopReason(ctx, s.Run)
				e.kill(killStop)
			}
		} else if p := w.pending[tok]; p != nil {
			if p.outcome != storage.StateStopped {
				p.outcome, p.reason = storage.StateStopped, w.stopReason(ctx, s.Run)
			}
		} else {
			// Stopped before we started it (or its report got lost):
			// settle it without executing.
			w.mem.start(tok, slotKey(w.identity, s.Index), time.Now())
			w.pending[tok] = &finished{run: s.Run, token: tok, identity: w.identity, outcome: storage.StateStopped, reason: w.stopReason(ctx, s.Run)}
		}
	case storage.StateRunning:
		if w.running[tok] != nil || w.pending[tok] != nil {
			return
		}
		if m := w.mem.get(tok); m != nil {
			if (m.outcome != nil && m.outcome.drop) || (!m.reported.IsZero() && m.reported.Before(readAt)) {
				w.replayLocked(tok, s, m)
			}
			return // executing, or its report is in flight
		}
		slot := slotKey(w.identity, s.Index)
		if old, high := w.mem.predates(tok, slot); old {
			w.refuseLocked(tok, s, high)
			return
		}
		w.startLocked(ctx, s)
	case storage.StateSucceeded, storage.StateFailed, storage.StateStopped, storage.StateDiscarded:
		if e := w.running[tok]; e != nil {
			e.kill(killDrop)
		}
		delete(w.pending, tok)
	}
	// LAUNCHED: not all task slots are assigned yet; keep going if we
	// already execute it, do not start it.
}

// replayLocked answers an assignment this worker already executed and
// reported, handed back RUNNING by a store that lost the report: it is not
// run again; its outcome is reported again (FAILED AlreadyExecutedReason if
// the outcome is not known). w.mu is held.
func (w *agent) replayLocked(tok string, s storage.SlotState, m *memo) {
	f := &finished{run: s.Run, token: tok, identity: w.identity, outcome: storage.StateFailed, reason: AlreadyExecutedReason}
	if m.outcome != nil && !m.outcome.drop {
		c := *m.outcome
		c.identity = w.identity // handed back to this identity
		f = &c
	}
	m.reported = time.Time{}
	w.pending[tok] = f
	w.rollback.WithLabelValues("replayed").Inc()
	w.Logger.Warn("assignment already executed here; reporting its outcome again, not running it (the store lost the report: a Redis failover?)",
		"run", s.Run, "token", tok, "outcome", f.outcome)
}

// refuseLocked answers an assignment whose token is older than one this
// worker already started on the same slot: a rolled-back assignment, never
// a new one. It is reported FAILED without running. w.mu is held.
func (w *agent) refuseLocked(tok string, s storage.SlotState, high tokenKey) {
	w.mem.start(tok, "", time.Now())
	reason := fmt.Sprintf("%s (token %s predates token %s started on slot %d)", AlreadyExecutedReason, tok, high, s.Index)
	w.pending[tok] = &finished{run: s.Run, token: tok, identity: w.identity, outcome: storage.StateFailed, reason: reason}
	w.rollback.WithLabelValues("refused").Inc()
	w.Logger.Warn("assignment predates one already run on its slot; not running it", "run", s.Run, "token", tok, "slot", s.Index)
}
