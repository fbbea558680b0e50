package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmsched/wasmsched/storage"
)

// Worker defaults.
const (
	DefaultHeartbeatTTL = 3 * time.Second
	DefaultStopGrace    = 5 * time.Second
	// MinHeartbeatTTL is the shortest HeartbeatTTL Validate accepts.
	MinHeartbeatTTL = 30 * time.Millisecond
	// DefaultDrainTimeout is how long a graceful shutdown waits for the
	// runs in flight before it interrupts them.
	DefaultDrainTimeout = 30 * time.Second
)

// agent is the worker behind Worker: it registers Slots fixed slots under
// a fresh identity, heartbeats every HeartbeatTTL/3 (one script of two
// commands; every third beat, once a TTL, also reads its slots and
// reconciles), learns its new assignments and stop requests from the
// namespace's slot-events (then reads those slots: PollAssigned) and
// executes every run whose task 0 sits on one of its slots, exactly once
// per assignment token, with the handler of the run's group (runHandler).
// It obeys stop requests (run state STOPPING: the handler's context ends,
// then it reports STOPPED) and timeouts (FAILED "timed out after D",
// storage.TimedOutReason), and reports SUCCEEDED, FAILED or STOPPED with
// what the attempt produced through the token-guarded storage.ReportBatch.
//
// When heartbeats fail for longer than HeartbeatTTL (Redis unreachable) the
// worker kills its executions (it may be reaped and its runs reassigned)
// and reports them FAILED once Redis answers again, unless it was reaped.
// When the heartbeat answers storage.ErrUnknownWorker (the worker missed its
// heartbeats and was reaped; its runs were reassigned) the worker kills all
// its executions without reporting and registers again under a new
// identity. When ctx is cancelled it drains: its slots take no new runs
// (storage.DrainWorker), the runs in flight go on for up to DrainTimeout
// (or until stop), then the rest are interrupted and reported FAILED
// (InterruptedReason; retried with attempts left), and it deregisters.
//
// Without handlers, Exec selects the exec handler and else Simulate (the
// package's tests). The zero value of every field except Store and
// Advertise is a default. Run may be called once.
type agent struct {
	// Store is the namespace store (required).
	Store *storage.Store
	// Advertise is the address in the identity stamp (required).
	Advertise string
	// Slots is the number of fixed slots (default 1).
	Slots int
	// HeartbeatTTL is the worker's liveness TTL; it heartbeats every TTL/3
	// (default 3s, minimum 30ms).
	HeartbeatTTL time.Duration
	// Exec is the program to run per run; empty means simulate.
	Exec string
	// ExecArgs are the program's arguments.
	ExecArgs []string
	// StopGrace is the time between SIGTERM and SIGKILL (default 5s).
	StopGrace time.Duration
	// Journal, when set, is a file that gets one line "RUN_ID TOKEN
	// ATTEMPT" per execution start, appended with O_APPEND and fsynced
	// before the execution starts.
	Journal string
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, gets the worker metrics.
	Registerer prometheus.Registerer
	// handlers by group, and the default (nil: Exec's program, or
	// simulate); Worker.Handle sets them before Run.
	handlers map[string]Handler
	def      Handler
	// DrainTimeout bounds a graceful shutdown's wait for in-flight runs.
	DrainTimeout time.Duration
	stopNow      chan struct{} // closed: end a drain at once
	stopOnce     sync.Once

	mu       sync.Mutex
	identity string
	running  map[string]*execution // by token
	mem      *tokenMemory          // tokens executed or settled (memory.go)
	pending  map[string]*finished  // by token: outcomes not yet reported
	done     chan *finished
	runsDone *prometheus.CounterVec
	rollback *prometheus.CounterVec // what a store rollback made the worker do (memory.go)
	journal  *os.File
	draining atomic.Bool         // a graceful shutdown started: no re-registration
	lastBeat time.Time           // send time of the last successful heartbeat (main loop only)
	events   []storage.SlotEvent // announced assignments not yet polled (under mu)
	relisten chan string         // a new identity: its slot-events channel replaces the old one (subscribe)
	wg       sync.WaitGroup
	// Reports go out on their own goroutine (reporter), so a report that
	// blocks (a failed master, a WAIT no replica answers) never holds
	// back a heartbeat: reportKick asks it to send what is pending,
	// reported tells the main loop it sent some (a drain may be over).
	reportKick chan struct{}
	reported   chan struct{}
	reportMu   sync.Mutex // one retryReports at a time
}

// finished is the outcome of one execution, to be reported.
type finished struct {
	run, token string
	// identity is the worker identity the assignment was made to: the
	// report goes out under it, also after a re-registration (reaped while
	// its heartbeats were refused or lost), and lands while the run's
	// assignment still names it (report.lua checks the token, not the
	// registration)
	identity string
	group    string // "" if unknown (then Report reads it)
	outcome  storage.State
	reason   string
	drop     bool // killed because the assignment is gone: do not report
	// what the attempt produced (storage.ReportReq)
	result, output string
	exitCode       *int
}

// Validate checks the configuration and fills in defaults.
func (w *agent) Validate() error {
	switch {
	case w.Store == nil:
		return errors.New("worker: Store is required")
	case strings.TrimSpace(w.Advertise) == "":
		return errors.New("worker: Advertise address is required")
	case strings.ContainsAny(w.Advertise, "#{},| \t\r\n"):
		return fmt.Errorf("worker: advertise address %q must not contain '#', '{', '}', ',', '|' or whitespace", w.Advertise)
	case w.Slots < 0:
		return fmt.Errorf("worker: slots must be >= 1, got %d", w.Slots)
	case w.HeartbeatTTL < 0:
		return fmt.Errorf("worker: heartbeat TTL must be positive, got %v", w.HeartbeatTTL)
	case w.HeartbeatTTL != 0 && w.HeartbeatTTL < MinHeartbeatTTL:
		return fmt.Errorf("worker: heartbeat TTL %v is below the minimum %v", w.HeartbeatTTL, MinHeartbeatTTL)
	case w.StopGrace < 0:
		return fmt.Errorf("worker: stop grace must not be negative, got %v", w.StopGrace)
	}
	return nil
}

// withDefaults fills the zero fields with their defaults (Run does, once).
func (w *agent) withDefaults() {
	if w.Slots == 0 {
		w.Slots = 1
	}
	if w.HeartbeatTTL == 0 {
		w.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if w.StopGrace == 0 {
		w.StopGrace = DefaultStopGrace
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	if w.DrainTimeout == 0 {
		w.DrainTimeout = DefaultDrainTimeout
	}
	if w.stopNow == nil {
		w.stopNow = make(chan struct{})
	}
	if w.def == nil {
		if w.Exec != "" {
			w.def = &execHandler{prog: w.Exec, args: w.ExecArgs, grace: w.StopGrace, log: w.Logger, env: execEnv(DefaultExecEnvDeny)}
		} else {
			w.def = Simulate()
		}
	}
}

// handlerFor is the handler of group g's runs.
func (w *agent) handlerFor(g string) Handler {
	if h := w.handlers[g]; h != nil {
		return h
	}
	return w.def
}

// Identity returns the current identity stamp ("" before registration). It
// changes when the worker re-registers after being reaped.
func (w *agent) Identity() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.identity
}

// Running returns the run ids being executed right now.
func (w *agent) Running() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.running))
	for _, e := range w.running {
		out = append(out, e.run)
	}
	return out
}

// Run registers the worker and serves until ctx is cancelled. It returns nil
// after a clean shutdown, or the error that prevented the first
// registration.
func (w *agent) Run(ctx context.Context) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.withDefaults()
	w.running = map[string]*execution{}
	w.mem = newTokenMemory()
	w.pending = map[string]*finished{}
	w.done = make(chan *finished, 256) // room for a burst of finished runs, reported in one pipeline
	w.relisten = make(chan string, 1)
	w.reportKick = make(chan struct{}, 1)
	w.reported = make(chan struct{}, 1)
	w.runsDone = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmsched_worker_runs_total",
		Help: "Runs executed by this worker, by outcome (SUCCEEDED, FAILED, STOPPED, DROPPED).",
	}, []string{"outcome"})
	w.rollback = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmsched_worker_rollbacks_total",
		Help: "Assignments the store handed back after losing what this worker had done (a Redis failover): replayed (outcome reported again, not run), refused (token older than one already run on the slot: reported FAILED, not run), lost (the run itself is gone: kept in the namespace's lost list).",
	}, []string{"what"})
	for _, what := range []string{"replayed", "refused", "lost"} {
		w.rollback.WithLabelValues(what)
	}
	if w.Registerer != nil {
		for _, c := range []**prometheus.CounterVec{&w.runsDone, &w.rollback} {
			if err := w.Registerer.Register(*c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return fmt.Errorf("worker: metrics: %w", err)
				}
				*c = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	if w.Journal != "" {
		f, err := os.OpenFile(w.Journal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("worker: journal: %w", err)
		}
		w.journal = f
		defer f.Close()
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	// After ctx ends the worker drains: Redis calls go on (heartbeats,
	// reports) on a context that is not cancelled, bounded by the drain.
	parentDone := ctx.Done()
	ctx = context.WithoutCancel(ctx)
	subCtx, stopSub := context.WithCancel(ctx)
	repCtx, stopReporter := context.WithCancel(ctx)
	repDone := make(chan struct{})
	defer func() {
		stopSub() // the subscriber first: shutdown waits for it
		stopReporter()
		<-repDone // shutdown reports what is left itself
		w.shutdown()
	}()

	tick := time.NewTicker(w.HeartbeatTTL / 3)
	defer tick.Stop()
	kick := w.subscribe(subCtx)
	go func() {
		defer close(repDone)
		w.reporter(repCtx)
	}()
	w.heartbeat(ctx, true)
	var drainEnd <-chan time.Time
	for beats := 1; ; {
		if w.draining.Load() && w.idle() {
			w.Logger.Info("drained: no run in flight")
			return nil
		}
		select {
		case <-parentDone:
			parentDone = nil
			drainEnd = time.After(w.DrainTimeout)
			w.drain(ctx)
		case <-drainEnd:
			w.Logger.Warn("drain timeout: interrupting the runs in flight", "timeout", w.DrainTimeout, "running", len(w.Running()))
			return nil
		case <-w.stopNow:
			if w.draining.Load() {
				w.Logger.Warn("stopping now: interrupting the runs in flight", "running", len(w.Running()))
			}
			return nil
		case f := <-w.done:
			// Take every execution that has finished by now; the reporter
			// sends them together (one pipelined round trip: retryReports).
			report := w.record(f)
		drain:
			for {
				select {
				case f := <-w.done:
					report = w.record(f) || report
				default:
					break drain
				}
			}
			if report {
				w.kickReports()
			}
		case <-w.reported:
			// (a drain ends once the last report is in: checked above)
		case <-tick.C:
			w.heartbeat(ctx, beats%fullBeat == 0)
			beats++
		case <-kick:
			w.poll(ctx)
		}
	}
}

// drain starts a graceful shutdown: the worker's slots take no new runs
// (storage.DrainWorker); the runs in flight go on until they end, the
// drain times out or StopNow.
func (w *agent) drain(ctx context.Context) {
	w.draining.Store(true)
	id := w.Identity()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	busy, err := w.Store.DrainWorker(dctx, id)
	if err != nil {
		w.Logger.Warn("draining: could not take the slots out of the free pool; new runs may still arrive", "identity", id, "err", err)
	}
	w.Logger.Info("draining: taking no new runs", "identity", id, "in_flight", busy, "timeout", w.DrainTimeout)
}

// idle reports whether no execution runs and no report waits.
func (w *agent) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running) == 0 && len(w.pending) == 0
}

// stop ends a drain at once (the runs in flight are interrupted).
func (w *agent) stopSignal() {
	w.stopOnce.Do(func() { close(w.stopNow) })
}

// fullBeat: every fullBeat-th heartbeat reads the worker's slots and
// reconciles (once per HeartbeatTTL at the default period of TTL/3); the
// others only move the expiry. New assignments and stop requests come on
// slot-events at once; the full beat is what catches a lost message, a
// run reassigned after the worker was presumed dead, or one finished
// elsewhere.
const fullBeat = 3

// subscribe listens on the worker's own slot-events channel
// (storage.Keys.SlotEvents of its identity: the leader announces there each
// task-0 slot of this worker it assigns or asks to stop:
// storage.ParseSlotEvents), queues the events naming this worker and
// returns a channel that gets a token when there are some, so the worker
// starts the run at once instead of at its next heartbeat. A new identity
// (a re-registration: register) moves the subscription to its channel. It
// listens on the shared channel of older hosts too
// (storage.Keys.SharedSlotEvents): workers upgrade before their hosts.
// Best effort: without the subscription (or when a message is lost) the
// heartbeat still picks the work up.
func (w *agent) subscribe(ctx context.Context) <-chan struct{} {
	kick := make(chan struct{}, 1)
	keys := w.Store.Keys()
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
		err := w.Store.RegisterWorker(ctx, id, w.Slots, w.HeartbeatTTL)
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

// stopReason is the reason recorded with a stop request (kept in the
// STOPPED report), or a generic one.
func (w *agent) stopReason(ctx context.Context, runID string) string {
	if r, err := w.Store.GetRun(ctx, runID); err == nil && r.Reason != "" {
		return r.Reason
	}
	return "stopped on request"
}

// startLocked starts executing the run of assignment s. w.mu is held.
// The run record comes with s (SlotState.Detail, read with the slots);
// only without it is it read here.
func (w *agent) startLocked(ctx context.Context, s storage.SlotState) {
	var run storage.Run
	if s.Detail != nil && s.Detail.ID == s.Run {
		run = *s.Detail
	} else {
		r, err := w.Store.GetRun(ctx, s.Run)
		if err != nil {
			w.Logger.Warn("cannot read assigned run; will retry", "run", s.Run, "err", err)
			return
		}
		run = r
	}
	w.mem.start(s.Token, slotKey(w.identity, s.Index), time.Now())
	if w.journal != nil {
		_, err := fmt.Fprintf(w.journal, "%s %s %d\n", s.Run, s.Token, max(run.Attempt, 1))
		if err == nil {
			err = w.journal.Sync()
		}
		if err != nil {
			w.Logger.Error("journal write failed", "run", s.Run, "err", err)
		}
	}
	e := newExecution(s.Run, s.Token, run.Group, run.Timeout)
	e.identity = w.identity
	w.running[s.Token] = e
	if run.Timeout > 0 {
		// The attempt's deadline, from its start here: stopped as an
		// operator stop would be, reported FAILED "timed out after D".
		e.deadline = time.AfterFunc(run.Timeout, func() { e.kill(killTimeout) })
	}
	log := w.Logger.With("run", s.Run, "token", s.Token, "group", run.Group)
	log.Info("run started", "mode", w.mode())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f := w.runHandler(e, run, log)
		if e.deadline != nil {
			e.deadline.Stop()
		}
		e.cancel()
		f.group, f.identity = run.Group, e.identity
		w.done <- f
	}()
}

func (w *agent) mode() string {
	switch w.def.(type) {
	case *execHandler:
		return "exec"
	case simulateHandler:
		return "simulate"
	}
	return "handler"
}

// runHandler runs the run's handler with the execution's context and
// turns what it returned into the outcome to report: a kill's reason wins
// (stop, timeout, shutdown, lost), then an error or a panic (FAILED), then
// a result within MaxResult (SUCCEEDED). A handler that does not return
// within StopGrace + 2 s of its context ending is abandoned.
func (w *agent) runHandler(e *execution, run storage.Run, log *slog.Logger) *finished {
	r := runOf(run, w.Store.Namespace())
	h := w.handlerFor(run.Group)
	type ret struct {
		res string
		err error
	}
	done := make(chan ret, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				log.Error("handler panicked", "panic", p)
				done <- ret{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		res, err := h.Handle(e.ctx, r)
		done <- ret{res, err}
	}()
	var out ret
	select {
	case out = <-done:
	case <-e.ctx.Done():
		t := time.NewTimer(w.StopGrace + 2*time.Second)
		select {
		case out = <-done:
			t.Stop()
		case <-t.C:
			log.Warn("handler did not return after its context ended; abandoning it", "grace", w.StopGrace)
		}
	}
	var f *finished
	switch why := e.reason(); {
	case why != 0:
		f = why.result(e)
	case out.err != nil:
		f = &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: out.err.Error()}
	case len(out.res) > storage.MaxResult:
		f = &finished{run: e.run, token: e.token, outcome: storage.StateFailed,
			reason: fmt.Sprintf("result is %d bytes, at most %d", len(out.res), storage.MaxResult)}
	default:
		f = &finished{run: e.run, token: e.token, outcome: storage.StateSucceeded, result: out.res}
	}
	f.output, f.exitCode = r.outcome()
	return f
}

// finish handles a finished execution: report it unless dropped.
func (w *agent) finish(ctx context.Context, f *finished) {
	if w.record(f) {
		w.retryReports(ctx)
	}
}

// record books a finished execution (pending report unless dropped) and
// reports whether it has something to report.
func (w *agent) record(f *finished) bool {
	w.mu.Lock()
	delete(w.running, f.token)
	w.mem.finish(f)
	outcome := string(f.outcome)
	if f.drop {
		outcome = "DROPPED"
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
		case errors.Is(err, storage.ErrNotOwner), errors.Is(err, storage.ErrUnknownWorker), errors.Is(err, storage.ErrInvalid):
			w.Logger.Warn("report refused; dropping it", "run", p.run, "token", p.token, "outcome", p.outcome, "err", err)
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
		if cur := w.pending[p.token]; cur != nil && cur.outcome == p.outcome {
			delete(w.pending, p.token)
			w.mem.reported(p.token, time.Now()) // done with, as far as this worker knows
		}
		w.mu.Unlock()
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

// shutdown interrupts every execution still in flight and reports them
// FAILED (InterruptedReason: retried if attempts are left), best effort,
// then deregisters the worker once none of its slots is assigned.
func (w *agent) shutdown() {
	w.mu.Lock()
	for _, e := range w.running {
		e.kill(killShutdown)
	}
	running := len(w.running)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), w.StopGrace+5*time.Second)
	defer cancel()
	for ; running > 0; running-- {
		select {
		case f := <-w.done:
			w.finish(ctx, f)
		case <-ctx.Done():
		}
	}
	w.wg.Wait()
	w.retryReports(ctx)
	id := w.Identity()
	if err := w.Store.DeregisterWorker(ctx, id); err != nil {
		w.Logger.Warn("worker not deregistered; the leader reaps it after its heartbeat TTL", "identity", id, "err", err)
	}
	w.Logger.Info("worker stopped", "identity", id)
}

// killReason says why an execution is being killed.
type killReason int

const (
	killStop     killReason = iota + 1 // stop request: report STOPPED
	killDrop                           // assignment gone: do not report
	killShutdown                       // worker shutting down (a drain's end): report FAILED
	killLost                           // heartbeat lease may be lost: report FAILED
	killTimeout                        // the run's timeout passed: report FAILED "timed out"
)

func (k killReason) result(e *execution) *finished {
	switch k {
	case killStop:
		return &finished{run: e.run, token: e.token, outcome: storage.StateStopped, reason: e.stopReason}
	case killShutdown:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: InterruptedReason}
	case killLost:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: LostContactReason}
	case killTimeout:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: storage.TimedOutReason(e.timeout)}
	default:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: "assignment lost", drop: true}
	}
}

// execution is one run being executed.
type execution struct {
	run, token string
	identity   string // the worker identity it was assigned to
	group      string
	stopReason string // set (under Worker.mu) before kill(killStop)
	timeout    time.Duration
	deadline   *time.Timer // kills it at its timeout (nil: none)
	ctx        context.Context
	cancel     context.CancelFunc
	once       sync.Once
	why        atomic.Int32 // the first kill reason (0: none)
}

func newExecution(run, token, group string, timeout time.Duration) *execution {
	e := &execution{run: run, token: token, group: group, timeout: timeout}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// kill asks the execution to end (its handler's context is cancelled);
// only the first reason counts.
func (e *execution) kill(why killReason) {
	e.once.Do(func() {
		e.why.Store(int32(why))
		e.cancel()
	})
}

// reason is the first kill reason (0: not killed).
func (e *execution) reason() killReason { return killReason(e.why.Load()) }
