package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
	"github.com/wasmsched/wasmsched/storage"
)

// Config is a Worker's settings; the zero value of every field but one of
// Redis/Client and Advertise is a default.
type Config struct {
	// Redis is the URL (redis://, rediss://, cluster seeds,
	// redis+sentinel://: docs/operations.md); Client, when set, is used
	// instead (and not closed by the worker).
	Redis  string
	Client redis.UniversalClient
	// Namespace is the namespace served (default "default").
	Namespace string
	// Advertise is the address in the worker's identity stamp (required;
	// no '#', '{', '}', ',', '|' or whitespace).
	Advertise string
	// Slots is the number of runs it executes at once (default 1).
	Slots int
	// Labels are what the worker carries for placement: a group that
	// requires labels (group set --require) sends its runs only to workers
	// with every one of them. At most 16, bounded as run labels are.
	Labels map[string]string
	// Groups are the groups it serves: names, or patterns where '*'
	// matches any text (at most 64). None: every group, but a worker that
	// registered handlers with Handle and no HandleDefault serves exactly
	// the groups of its handlers. A run of another group is never placed on it.
	Groups []string
	// HeartbeatTTL is its liveness TTL; it heartbeats every TTL/3
	// (default 3s, at least 30ms).
	HeartbeatTTL time.Duration
	// StopGrace is how long a handler has, after its context ended, before
	// the worker gives up on it (default 5s; Exec's SIGTERM-to-SIGKILL
	// grace is its own).
	StopGrace time.Duration
	// DrainTimeout bounds a graceful shutdown's wait for the runs in
	// flight (default 30s).
	DrainTimeout time.Duration
	// Journal, when set, is a file that gets one line "RUN_ID TOKEN
	// ATTEMPT" per execution start, fsynced before the handler runs.
	Journal string
	// Logger (default slog.Default()); Registerer, when set, gets the
	// worker's metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// TracerProvider gets the worker's spans: one "wasmsched.execute" per
	// attempt, a child of the run's submit span, and its
	// "wasmsched.report" (nil: the global OpenTelemetry provider). The
	// handler's context carries the execution span either way, so a run's
	// trace goes on into the handler (and an Exec program's TRACEPARENT)
	// even when nothing here records.
	TracerProvider trace.TracerProvider
}

// Worker executes the runs the leader assigns to its slots with the
// handler of each run's group: register handlers, then Run.
type Worker struct {
	a     *agent
	close func() error
}

// New connects (a Redis URL) or uses Client and returns a worker for the
// namespace, not yet registered (Run does).
func New(ctx context.Context, c Config) (*Worker, error) {
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.DrainTimeout < 0 {
		return nil, fmt.Errorf("worker: drain timeout must not be negative, got %v", c.DrainTimeout)
	}
	rdb, closeFn := c.Client, func() error { return nil }
	if rdb == nil {
		if c.Redis == "" {
			return nil, errors.New("worker: a Redis URL or a Client is required")
		}
		var err error
		if rdb, err = storage.Connect(ctx, c.Redis); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		closeFn = rdb.Close
	}
	st, err := storage.New(rdb, c.Namespace)
	if err != nil {
		_ = closeFn()
		return nil, fmt.Errorf("worker: %w", err)
	}
	a := &agent{Store: st, Advertise: c.Advertise, Slots: c.Slots, HeartbeatTTL: c.HeartbeatTTL, StopGrace: c.StopGrace,
		DrainTimeout: c.DrainTimeout, Journal: c.Journal, Logger: c.Logger, Registerer: c.Registerer,
		Placement: storage.WorkerPlacement{Labels: limits.LabelsFromMap(c.Labels), Groups: c.Groups},
		handlers:  map[string]Handler{}, stopNow: make(chan struct{}), tracer: tracing.Tracer(c.TracerProvider)}
	if err := a.Validate(); err != nil {
		_ = closeFn()
		return nil, err
	}
	return &Worker{a: a, close: closeFn}, nil
}

// Handle makes h the handler of group's runs (before Run).
func (w *Worker) Handle(group string, h Handler) {
	w.a.handlers[group] = h
}

// HandleDefault makes h the handler of the runs of every group without
// its own (before Run). Without one, such a run fails ("no handler for
// group G on this worker").
func (w *Worker) HandleDefault(h Handler) { w.a.def = h }

// Run registers the worker and serves until ctx ends, then drains: its
// slots take no new runs, the runs in flight go on for up to DrainTimeout
// (or until StopNow), the rest are interrupted (FAILED "interrupted by
// worker shutdown", retried if they have attempts left), and the worker
// deregisters. It returns nil after that, or the error that prevented the
// first registration. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	defer func() { _ = w.close() }()
	if w.a.def == nil && len(w.a.Placement.Groups) == 0 && len(w.a.handlers) > 0 {
		// only the groups it has handlers for: no other group's run is placed on it
		for g := range w.a.handlers {
			w.a.Placement.Groups = append(w.a.Placement.Groups, g)
		}
		slices.Sort(w.a.Placement.Groups)
	}
	if w.a.def == nil {
		w.a.def = HandlerFunc(func(_ context.Context, r *Run) (string, error) {
			return "", fmt.Errorf("no handler for group %s on this worker", r.Group)
		})
	}
	return w.a.Run(ctx)
}

// StopNow ends a drain at once: the runs in flight are interrupted (a
// second SIGTERM).
func (w *Worker) StopNow() { w.a.stopSignal() }

// Identity is the worker's identity stamp ("" before it registered); it
// changes when the worker registers again after being reaped.
func (w *Worker) Identity() string { return w.a.Identity() }

// Running lists the ids of the runs executing now.
func (w *Worker) Running() []string { return w.a.Running() }
