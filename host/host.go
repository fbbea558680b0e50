package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wasmsched/wasmsched/host/internal/engine"
	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// Defaults for zero Config fields.
const (
	DefaultLeaseTTL = 2 * time.Second
	// MinLeaseTTL is the shortest accepted lease TTL.
	MinLeaseTTL = 100 * time.Millisecond
	// refreshDivisor: the lock is refreshed every LeaseTTL/3.
	refreshDivisor = 3
	// retryDivisor: a standby tries to obtain every ~LeaseTTL/4 (jittered ±25%).
	retryDivisor = 4
	// marginDivisor: the local lease ends LeaseTTL/10 before the
	// lock's TTL would (clock rate drift, scheduling delay).
	marginDivisor = 10
	// DefaultAdminAddr is where `wasmsched serve` listens for admin HTTP.
	DefaultAdminAddr = "127.0.0.1:9090"
	// tickMultiple: the tick task runs every 5·LeaseTTL. The tick is a
	// liveness record and an idle deposed leader's way to learn it was
	// fenced; safety rests on the lease and the fence of every write, so
	// it need not be frequent (an idle namespace's Redis commands:
	// RATIONALE.md "Why does cost follow work?").
	tickMultiple = 5
)

// Config configures a Host. Zero fields take the defaults above.
type Config struct {
	// Store is the namespace's storage (required). Its client is also used
	// for the leader lock.
	Store *storage.Store
	// Identity is the stamp the host competes with; default
	// storage.NewIdentity(Advertise).
	Identity string
	// Advertise is the address in the identity; default the hostname.
	Advertise string
	// LeaseTTL is the leader lock TTL (>= MinLeaseTTL); default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// RefreshInterval is how often the leader refreshes the lock; default
	// LeaseTTL/3. Must be shorter than LeaseTTL - SafetyMargin.
	RefreshInterval time.Duration
	// RetryInterval is how often a standby tries to obtain; default LeaseTTL/4.
	RetryInterval time.Duration
	// SafetyMargin is subtracted from the lock TTL for the local lease
	// deadline; default LeaseTTL/10. Must be less than LeaseTTL/2.
	SafetyMargin time.Duration
	// TickInterval is the period of the built-in tick task (a fenced
	// liveness write, storage.Store.Tick); default 5·LeaseTTL; negative
	// disables the tick task.
	TickInterval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the host's metrics; default a new registry with the
	// Go and process collectors.
	Registry *prometheus.Registry
	// Admin, if not nil, is where the admin HTTP server listens (/healthz,
	// /readyz, /metrics, /status).
	Admin net.Listener
	// Engine configures the leader engine (serial coordinator, slot
	// manager, failover restore, drain, retention, stats); zero fields
	// take its defaults.
	Engine EngineConfig

	// bus carries the host's pub/sub subscriptions (leader releases,
	// policy changes, work events): a Bus of its own on Store's client,
	// or the one a Multi gives all its namespaces (one pub/sub connection
	// per process); share is a Multi's table of loaded policy versions.
	bus   *leader.Bus
	share *engine.Share
}

// Validate checks the config as given (zero fields are fine).
func (c Config) Validate() error {
	if c.Store == nil {
		return errors.New("host: config: Store is required")
	}
	if c.LeaseTTL != 0 && c.LeaseTTL < MinLeaseTTL {
		return fmt.Errorf("host: config: lease TTL %v: want >= %v", c.LeaseTTL, MinLeaseTTL)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"refresh interval", c.RefreshInterval}, {"retry interval", c.RetryInterval}, {"safety margin", c.SafetyMargin}} {
		if d.v < 0 {
			return fmt.Errorf("host: config: %s %v: want >= 0", d.name, d.v)
		}
	}
	ttl := c.LeaseTTL
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	if c.SafetyMargin >= ttl/2 {
		return fmt.Errorf("host: config: safety margin %v: want < lease TTL/2 (%v)", c.SafetyMargin, ttl/2)
	}
	margin := c.SafetyMargin
	if margin == 0 {
		margin = ttl / marginDivisor
	}
	if c.RefreshInterval != 0 && c.RefreshInterval >= ttl-margin {
		return fmt.Errorf("host: config: refresh interval %v: want < lease TTL - safety margin (%v)", c.RefreshInterval, ttl-margin)
	}
	if c.Identity != "" {
		if _, err := storage.ParseIdentity(c.Identity); err != nil {
			return fmt.Errorf("host: config: %w", err)
		}
	}
	return c.Engine.Validate()
}

// withDefaults returns c with zero fields filled in.
func (c Config) withDefaults() Config {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = c.LeaseTTL / refreshDivisor
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = c.LeaseTTL / retryDivisor
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = c.LeaseTTL / marginDivisor
	}
	if c.TickInterval == 0 {
		c.TickInterval = c.LeaseTTL * tickMultiple
	}
	if c.Advertise == "" {
		c.Advertise, _ = os.Hostname()
		if c.Advertise == "" {
			c.Advertise = "localhost"
		}
	}
	if c.Identity == "" {
		c.Identity = storage.NewIdentity(c.Advertise)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.bus == nil && c.Store != nil {
		c.bus = leader.NewBus(c.Store, c.Logger)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
		c.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return c
}

// Host is one wasmsched host process's runtime for one namespace: the
// leader elector, the leader tasks and the admin server.
type Host struct {
	cfg     Config
	ns      string
	elector *leader.Elector
	log     *slog.Logger

	leaderGauge *prometheus.GaugeVec
	transitions *prometheus.CounterVec

	engine *engine.Engine

	// noHint: a Multi's namespace host (the Multi gives compactHint once)
	noHint bool

	mu      sync.Mutex
	running bool
	isReady bool
}

// New validates cfg, fills defaults and builds a Host and its leader engine
// (it does not talk to Redis until Run). Close it after Run returned.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ns := cfg.Store.Namespace()
	h := &Host{cfg: cfg, ns: ns, log: cfg.Logger.With("namespace", ns)}
	h.leaderGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wasmsched_leader",
		Help: "1 while this host leads the namespace, else 0.",
	}, []string{"namespace"})
	h.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wasmsched_leader_transitions_total",
		Help: "Leadership changes of this host (promotions and demotions).",
	}, []string{"namespace", "to"})
	if err := cfg.Registry.Register(h.leaderGauge); err != nil {
		return nil, fmt.Errorf("host: register metrics: %w", err)
	}
	if err := cfg.Registry.Register(h.transitions); err != nil {
		return nil, fmt.Errorf("host: register metrics: %w", err)
	}
	h.leaderGauge.WithLabelValues(ns).Set(0)
	h.transitions.WithLabelValues(ns, "leader")
	h.transitions.WithLabelValues(ns, "standby")

	h.elector = leader.New(leader.Config{
		Namespace: ns, Identity: cfg.Identity, Store: cfg.Store, Bus: cfg.bus,
		TTL: cfg.LeaseTTL, Refresh: cfg.RefreshInterval, Retry: cfg.RetryInterval, Margin: cfg.SafetyMargin,
		Log: h.log, OnChange: h.onChange,
	})
	e, err := engine.New(ctx, engine.Deps{Store: cfg.Store, Registry: cfg.Registry, Log: h.log, Bus: cfg.bus,
		Identity: cfg.Identity, Share: cfg.share}, engine.Config(cfg.Engine))
	if err != nil {
		return nil, err
	}
	h.engine = e
	if cfg.TickInterval > 0 {
		h.elector.AddLeaderTask("tick", tickTask(cfg.Store, cfg.TickInterval, h.log, func() { e.CountFenced("tick") }))
	}
	for _, t := range e.Tasks() {
		h.elector.AddLeaderTask(t.Name, t.Run)
	}
	return h, nil
}

// Close closes the engine's loaded policies and, unless it was given in
// EngineConfig.Policies, its wasm runtime. Call it after Run returned.
func (h *Host) Close(ctx context.Context) error { return h.engine.Close(ctx) }

func (h *Host) onChange(leading bool, _ int64, _ string) {
	if leading {
		h.leaderGauge.WithLabelValues(h.ns).Set(1)
		h.transitions.WithLabelValues(h.ns, "leader").Inc()
	} else {
		h.leaderGauge.WithLabelValues(h.ns).Set(0)
		h.transitions.WithLabelValues(h.ns, "standby").Inc()
	}
}

// Identity is the host's identity stamp.
func (h *Host) Identity() string { return h.cfg.Identity }

// Leading reports whether the host holds a valid lease now.
func (h *Host) Leading() bool { return h.elector.Leading() }

// activeLoops is the number of leader task sets running now (0 or 1; tests).
func (h *Host) activeLoops() int { return h.elector.ActiveLoops() }

// maxActiveLoops is the highest activeLoops ever observed (tests).
func (h *Host) maxActiveLoops() int { return h.elector.MaxActiveLoops() }

// Ready reports whether the host has loaded its scripts and runs its elector.
func (h *Host) ready() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.isReady
}

// Run loads the scripts, starts the admin server (if configured) and runs
// the elector until ctx is cancelled. On return the leader tasks have
// stopped and the lock was released if held. A Host runs once.
func (h *Host) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.running {
		h.mu.Unlock()
		return errors.New("host: Run called twice")
	}
	h.running = true
	h.mu.Unlock()

	var admin *adminServer
	if h.cfg.Admin != nil {
		admin = serveAdmin(h.cfg.Admin, h.adminHandler(), h.log) // admin.go
		defer admin.close()
	}
	if err := h.cfg.Store.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("host: %w", err)
	}
	h.mu.Lock()
	h.isReady = true
	h.mu.Unlock()
	h.log.Info("host started", "identity", h.cfg.Identity, "lease_ttl", h.cfg.LeaseTTL)
	if !h.noHint {
		compactHint(ctx, h.cfg.Store, h.log)
	}
	err := h.elector.Run(ctx)
	h.mu.Lock()
	h.isReady = false
	h.mu.Unlock()
	h.log.Info("host stopped")
	return err
}

// tickTask is the leader task that makes a fenced liveness write
// (storage.Store.Tick) when the term starts and every interval after. It
// checks lease.Valid() before every write. It returns storage.ErrFenced
// (which demotes the host), after counting it with fenced, when a write is
// rejected by the fence; other errors are logged and retried at the next
// tick.
func tickTask(st *storage.Store, interval time.Duration, log *slog.Logger, fenced func()) leader.LeaderTask {
	return func(ctx context.Context, lease *leader.Lease) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for first := true; ; first = false {
			if !first {
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
			if !lease.Valid() {
				log.Info("tick skipped: lease not valid", "epoch", lease.Epoch(), "reason", lease.Reason())
				return nil
			}
			err := st.Tick(ctx, lease.Fence())
			switch {
			case err == nil, ctx.Err() != nil:
			case errors.Is(err, storage.ErrFenced):
				log.Warn("tick rejected: fenced", "epoch", lease.Epoch(), "err", err)
				fenced() // wasmsched_fenced_total{task="tick"}
				return err
			default:
				log.Warn("tick failed", "epoch", lease.Epoch(), "err", err)
			}
		}
	}
}

// Status returns this host's view (what /status serves).
func (h *Host) Status() Status {
	st := Status{Namespace: h.ns, Identity: h.cfg.Identity, Ready: h.ready()}
	if l := h.elector.Lease(); l != nil && l.Valid() {
		st.Leading, st.Epoch = true, l.Epoch()
	}
	st.Runtime = h.engine.Status()
	return st
}

// handleStatus serves /status (JSON).
func (h *Host) handleStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.Status())
}

// AdminHandler returns the admin HTTP handler: /healthz (200 while the
// process runs), /readyz (200 once scripts are loaded and the elector runs,
// else 503), /metrics (Prometheus), /status (JSON, see Status).
func (h *Host) adminHandler() *http.ServeMux {
	return adminMux(func() string {
		if !h.ready() {
			return "not ready"
		}
		return ""
	}, h.cfg.Registry, h.handleStatus) // status.go
}
