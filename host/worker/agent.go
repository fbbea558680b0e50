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
	"go.opentelemetry.io/otel/trace"

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
	// Placement is what it registers for placement: its labels and the
	// groups it serves (none: every group).
	Placement storage.WorkerPlacement
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
	// tracer makes the execution and report spans (nil: the global
	// provider's)
	tracer trace.Tracer
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
	// span is the attempt's execution span (nil for an execution that
	// never ran a handler), ended once its report is settled (endSpans);
	// at is when the handler returned
	span trace.Span
	at   time.Time
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
	if err := w.Placement.Validate(); err != nil {
		return fmt.Errorf("worker: %w", err)
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
	if err := w.setupMetrics(); err != nil {
		return err
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
			w.collect(f)
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

// setupMetrics makes the worker's counters and registers them (sharing
// the ones another worker in the process registered first).
func (w *agent) setupMetrics() error {
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
	return nil
}

// collect takes f and every other execution that has finished by now; the
// reporter sends them together (one pipelined round trip: retryReports).
func (w *agent) collect(f *finished) {
	report := w.record(f)
	for {
		select {
		case f := <-w.done:
			report = w.record(f) || report
		default:
			if report {
				w.kickReports()
			}
			return
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
