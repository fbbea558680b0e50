package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Engine defaults (zero Config fields).
const (
	// DefaultCoordinators is how many batches of a pass are decided and
	// applied at once: one. A pass already pipelines each batch's snapshots
	// and applies, and one batch at a time lets the next pass's batch grow
	// while this one applies; more at once cost Redis more per run and, on
	// a namespace with fewer free slots than ready groups, launched past
	// the free slots (RATIONALE.md "Why one coordinator batch at a
	// time by default?").
	DefaultCoordinators = 1
	// DefaultPollInterval is how long the coordinator, the slot manager,
	// the drainer and the restore task wait for a wake-up (work-events,
	// each other) before they look anyway: a safety net, so it is long
	// (after work the coordinator looks again sooner a few times).
	DefaultPollInterval = time.Minute
	// DefaultSlotInterval is how often the slot manager looks again while
	// the oldest LAUNCHED run waits for slots and nothing woke it.
	DefaultSlotInterval = time.Second
	// DefaultSlotGuard is how long a LAUNCHED run that does not fit lets
	// younger runs that fit take slots past it (backfill) before the slot
	// manager holds the freed slots for it.
	DefaultSlotGuard = 30 * time.Second
	// DefaultUnfitTimeout is how long a LAUNCHED run may need more slots
	// than every live worker has together before it is failed.
	DefaultUnfitTimeout = 5 * time.Minute
	// DefaultRestoreInterval is the reaper's period while slots are
	// assigned (a dead worker may hold runs); with none it waits a
	// PollInterval.
	DefaultRestoreInterval = 500 * time.Millisecond
	// DefaultStatsInterval is how old the slots and runs gauges may be
	// when they are read (a scrape or /status refreshes them; nothing
	// reads Redis for them otherwise).
	DefaultStatsInterval = 2 * time.Second
	// DefaultRetention is how long finished runs are kept when neither
	// the group (group set --retention) nor Config.Retention says.
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultRetentionInterval = time.Second
	DefaultBackoff           = 100 * time.Millisecond
	DefaultMaxBackoff        = 5 * time.Second
	DefaultBatchSize         = 1000
	DefaultReusePolicy       = "reuse"
	// MaxCoordinators bounds Config.Coordinators.
	MaxCoordinators = 256
)

// Config is host.EngineConfig (the same fields, in the same order: host
// converts one into the other); its documentation is there.
type Config struct {
	Coordinators        int
	PolicyTimeout       time.Duration
	PolicyMemory        uint64
	PolicyPool          int
	PolicyCacheDir      string
	PolicyMaxModuleSize uint64
	Policies            *policies.Runtime
	ReusePolicy         string
	PollInterval        time.Duration
	SlotInterval        time.Duration
	SlotGuard           time.Duration
	UnfitTimeout        time.Duration
	MaxRunSlots         int
	RestoreInterval     time.Duration
	Retention           time.Duration
	RetentionInterval   time.Duration
	StatsInterval       time.Duration
	SeriesInterval      time.Duration
	Backoff, MaxBackoff time.Duration
	BatchSize           int
	RollbackAfter       int
	// TracerProvider, when set, gets a "wasmsched.decide" span per run
	// each applied decision acted on (trace.go); nil: no spans, no reads.
	TracerProvider trace.TracerProvider
}

// Validate reports unusable values (zero is always fine).
func (c Config) Validate() error {
	switch {
	case c.Coordinators < 0 || c.Coordinators > MaxCoordinators:
		return fmt.Errorf("host: runtime: coordinators %d: want 1..%d", c.Coordinators, MaxCoordinators)
	case c.PolicyTimeout < 0:
		return fmt.Errorf("host: runtime: policy timeout %v: want > 0", c.PolicyTimeout)
	case c.PolicyPool < 0:
		return fmt.Errorf("host: runtime: policy pool %d: want >= 0", c.PolicyPool)
	case c.PollInterval < 0 || c.SlotInterval < 0 || c.SlotGuard < 0 || c.UnfitTimeout < 0 || c.MaxRunSlots < 0 || c.MaxRunSlots > limits.MaxRunSlots || c.RestoreInterval < 0 || c.Backoff < 0 || c.MaxBackoff < 0 || c.RetentionInterval < 0:
		return errors.New("host: runtime: negative interval")
	case c.BatchSize < 0:
		return fmt.Errorf("host: runtime: batch size %d: want >= 0", c.BatchSize)
	}
	if c.ReusePolicy != "" {
		if err := limits.ValidateName("policy", c.ReusePolicy); err != nil {
			return fmt.Errorf("host: runtime: reuse policy: %w", err)
		}
	}
	if c.Policies == nil {
		if err := c.PolicyConfig(nil).Validate(); err != nil {
			return fmt.Errorf("host: runtime: %w", err)
		}
	}
	return nil
}

// policyConfig is the wasm runtime's configuration from the Policy*
// fields (used when Policies is nil).
func (c Config) PolicyConfig(log *slog.Logger) policies.Config {
	return policies.Config{MemoryLimit: c.PolicyMemory, CallTimeout: c.PolicyTimeout, PoolSize: c.PolicyPool,
		CacheDir: c.PolicyCacheDir, MaxModuleSize: c.PolicyMaxModuleSize, Logger: log}
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Coordinators == 0 {
		c.Coordinators = DefaultCoordinators
	}
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.SlotInterval, DefaultSlotInterval)
	def(&c.SlotGuard, DefaultSlotGuard)
	def(&c.UnfitTimeout, DefaultUnfitTimeout)
	def(&c.RestoreInterval, DefaultRestoreInterval)
	def(&c.StatsInterval, DefaultStatsInterval)
	def(&c.SeriesInterval, storage.SeriesInterval)
	def(&c.Retention, DefaultRetention)
	def(&c.RetentionInterval, DefaultRetentionInterval)
	def(&c.Backoff, DefaultBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	if c.MaxBackoff < c.Backoff {
		c.MaxBackoff = c.Backoff
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.ReusePolicy == "" {
		c.ReusePolicy = DefaultReusePolicy
	}
	return c
}

// Engine is the leader-side runtime of one namespace: the serial
// coordinator, the slot manager, the failover restore (with the dead-worker
// reaper) and the stats refresher, sharing one PolicySet and one set of
// metrics. NewEngine registers them as leader tasks of a Host; they run
// while the host leads.
type Engine struct {
	cfg    Config
	st     *storage.Store
	log    *slog.Logger
	m      *metrics
	set    *PolicySet
	wasm   *policies.Runtime
	ownsRT bool
	hot    *hotSwap // policy-channel subscriber (hotswap.go)

	coord   *Coordinator
	slots   *SlotManager
	restore *Restorer
	drain   *Drainer

	stopWork   func() // ends workEvents; nil without a Bus
	retWake    chan struct{}
	timerWake  chan struct{}
	stats      atomic.Pointer[statsView]
	statsMu    sync.Mutex                   // one refresh at a time
	statsLease atomic.Pointer[leader.Lease] // the term the gauges belong to; nil when not leading
	counts     sync.Map                     // outcome key -> *atomic.Int64
	acc        seriesAcc                    // what the next time-series point counts (series.go)
	closeOnce  sync.Once
	spans      *decisionSpans // nil: tracing off
}

// Deps are what an Engine shares with its host: the namespace's store, the
// metrics registry, the logger, the process's pub/sub bus and the host's
// identity (named in the registry history of an automatic rollback).
type Deps struct {
	Store    *storage.Store
	Registry prometheus.Registerer
	Log      *slog.Logger
	Bus      *leader.Bus // nil: no wake-ups by events, no hot-swap subscriber
	Identity string
	// Share, if set, is the loaded-version table shared by a Multi's
	// namespaces (over Config.Policies); nil: the engine's own.
	Share *Share
}

// CountFenced counts a fenced write of a leader task outside the engine
// (the host's tick) in wasmsched_fenced_total{task}.
func (e *Engine) CountFenced(task string) { e.m.fenced.WithLabelValues(e.m.ns, task).Inc() }

// New builds the engine of deps.Store's namespace: its leader tasks
// (Tasks: coordinator, slots, restore, drain, retention, stats), its
// policy set, the hot-swap subscriber and the work-event wake-ups. The
// host registers the tasks with its elector. Close it after the host's
// Run returned.
func New(ctx context.Context, deps Deps, cfg Config) (*Engine, error) {
	r, err := newEngine(ctx, deps.Store, deps.Registry, deps.Log, cfg, deps.Share)
	if err != nil {
		return nil, err
	}
	if err := r.startHotSwap(ctx, deps); err != nil { // hotswap.go
		_ = r.Close(ctx)
		return nil, err
	}
	r.workEvents(deps.Bus)
	return r, nil
}

func newEngine(ctx context.Context, st *storage.Store, reg prometheus.Registerer, log *slog.Logger, cfg Config, sh *Share) (*Engine, error) {
	if st == nil {
		return nil, errors.New("host: engine: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg, st.Namespace())
	if err != nil {
		return nil, err
	}
	r := &Engine{cfg: cfg, st: st, log: log, m: m, wasm: cfg.Policies}
	if r.wasm == nil {
		r.wasm, err = policies.NewRuntime(ctx, cfg.PolicyConfig(log))
		if err != nil {
			return nil, fmt.Errorf("host: engine: %w", err)
		}
		r.ownsRT = true
	}
	if sh == nil {
		sh = NewShare(r.wasm)
	}
	r.set = newPolicySet(st, sh, log)
	r.set.m = m
	r.coord = &Coordinator{rt: r, wake: make(chan struct{}, 1)}
	r.slots = &SlotManager{rt: r, wake: make(chan struct{}, 1)}
	r.restore = &Restorer{rt: r}
	r.drain = &Drainer{rt: r, wake: make(chan struct{}, 1)}
	r.restore.wake = make(chan struct{}, 1)
	r.retWake = make(chan struct{}, 1)
	r.timerWake = make(chan struct{}, 1)
	if cfg.TracerProvider != nil {
		r.spans = newDecisionSpans(st, cfg.TracerProvider, log, r.countN)
	}
	if err := reg.Register(statsCollector{r}); err != nil {
		return nil, fmt.Errorf("host: register runtime metrics: %w", err)
	}
	return r, nil
}

// workEventsBuffer is the work-events listener's buffer: a burst of
// reports (each handing back its group's next snapshot) must not overflow
// it, or those groups read their snapshots again (issue 23: with the
// default 16, three quarters of a 10,000-run bench's events were dropped).
// Bound: a message is a group name or a handed-back snapshot of at most 64
// runs (report.lua), a few KiB: at most ~32 MiB held while the listener
// stalls; past that, events are dropped as before (the groups read their
// snapshots).
const workEventsBuffer = 8192

// workEvents wakes the coordinator on every message of the namespace's
// work channel (a submit, a finished run, a stop request, a group's
// settings, a worker's new slots: keyspace.Keys.WorkEvents) until Close, so
// a serial group hands off without waiting for a poll; the slot manager
// too while the oldest LAUNCHED run waits for slots (a finished run freed
// some), and the retention task (a run finished); a storage.TimerEvent
// wakes only the timer task. Messages while this
// host does not lead only end a wait that is not happening.
func (r *Engine) workEvents(bus *leader.Bus) {
	if bus == nil {
		return
	}
	events, unsubscribe := bus.SubscribeBuffered(keyspace.Of(r.st).WorkEvents(), workEventsBuffer)
	done := make(chan struct{})
	r.stopWork = func() { close(done); unsubscribe() }
	go func() {
		for {
			select {
			case <-done:
				return
			case ev := <-events:
				if ev.Payload == storage.TimerEvent {
					wakeUp(r.timerWake)
					continue
				}
				r.workEvent(ev.Payload)
			}
		}
	}()
}

// workEvent takes one work-events message (not a storage.TimerEvent):
// the snapshots and references it hands back are offered to the
// coordinator (with the policy generation they were made at, or a read
// of dirty asked for), and the coordinator (unless every group in it was
// left with nothing to decide: storage.QuietWorkEvent), the slot manager
// while a run waits for slots, and retention are woken.
func (r *Engine) workEvent(payload string) {
	msgs := storage.SplitWorkEvents(payload)
	gen, all := storage.WorkEventGen(payload) // all: every group handed back, at policy generation gen
	decide := false                           // a group to decide (not only groups left quiet)
	for _, m := range msgs {
		if storage.QuietWorkEvent(m) {
			continue
		}
		decide = true
		if _, sn := storage.ParseWorkEvent(m); sn != nil {
			all = r.coord.offer(*sn) && all
		} else if ref, ok := storage.ParseWorkRef(m); ok {
			all = r.coord.offerRef(ref) && all
		} else {
			all = false // a name: its snapshot is read
		}
	}
	r.acc.touched()
	if decide {
		r.coord.handedBack(all, gen)
		wakeUp(r.coord.wake)
	}
	if r.slots.waiting.Load() {
		r.slots.freed.Add(int64(len(msgs)))
		wakeUp(r.slots.wake)
	}
	wakeUp(r.retWake)
}

// Tasks returns the runtime's leader tasks (NewEngine registers them).
func (r *Engine) Tasks() []leader.Task {
	ts := []leader.Task{
		{Name: "coordinator", Run: r.coord.Run},
		{Name: "slots", Run: r.slots.Run},
		{Name: "restore", Run: r.restore.Run},
		{Name: "drain", Run: r.drain.Run},
		{Name: "retention", Run: r.retention},
		{Name: "timer", Run: r.timer},
	}
	if r.cfg.StatsInterval > 0 {
		ts = append(ts, leader.Task{Name: "stats", Run: r.runStats})
	}
	if r.cfg.SeriesInterval > 0 {
		ts = append(ts, leader.Task{Name: "series", Run: r.series})
	}
	return ts
}

// Config returns the effective configuration.
func (r *Engine) Config() Config { return r.cfg }

// Policies returns the runtime's policy set.
func (r *Engine) Policies() *PolicySet { return r.set }

// Coordinator returns the serial coordinator.
func (r *Engine) Coordinator() *Coordinator { return r.coord }

// SlotManager returns the slot manager.
func (r *Engine) SlotManager() *SlotManager { return r.slots }

// Restorer returns the failover restore task.
func (r *Engine) Restorer() *Restorer { return r.restore }

// Close closes the loaded policies and, unless it was given in
// Config.Policies, the wasm runtime. Call it after the host stopped.
func (r *Engine) Close(ctx context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		if r.stopWork != nil {
			r.stopWork()
		}
		r.stopHotSwap()
		r.spans.close()
		err = r.set.Close(ctx)
		if r.ownsRT {
			err = errors.Join(err, r.wasm.Close(ctx))
		}
	})
	return err
}

// count bumps a /status counter ("decisions.applied", "allocations.no_slots", ...).
func (r *Engine) count(key string) { r.countN(key, 1) }

// countN adds n to a /status counter (nothing when n is 0).
func (r *Engine) countN(key string, n int) {
	if n == 0 {
		return
	}
	v, ok := r.counts.Load(key)
	if !ok {
		v, _ = r.counts.LoadOrStore(key, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(n))
}

// Counts returns the runtime's counters since start ("decisions.applied",
// "decisions.stale", "allocations.allocated", "restores.kept", ...).
func (r *Engine) Counts() map[string]int64 {
	out := map[string]int64{}
	r.counts.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// startHotSwap configures auto-rollback on the runtime's policy set and
// starts the policy-channel subscriber. It runs until Engine.Close
// (stopHotSwap), not until ctx ends: NewEngine's ctx may be a construction
// deadline. Called by NewEngine.
func (r *Engine) startHotSwap(ctx context.Context, deps Deps) error {
	reg := deps.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	rb, err := newRollbackMetrics(reg, r.st.Namespace())
	if err != nil {
		return err
	}
	k := r.cfg.RollbackAfter
	switch {
	case k == 0:
		k = DefaultRollbackAfter
	case k < 0:
		k = 0
	}
	r.set.rollbackAfter = k
	r.set.who = "host " + deps.Identity
	r.set.rb = rb
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hs := &hotSwap{r: r, bus: deps.Bus, cancel: cancel, done: make(chan struct{})}
	r.hot = hs
	go hs.run(ctx)
	return nil
}

// stopHotSwap stops the subscriber and waits for it (idempotent).
func (r *Engine) stopHotSwap() {
	if hs := r.hot; hs != nil {
		hs.once.Do(func() {
			hs.cancel()
			<-hs.done
		})
	}
}

// refreshStats reads the slot table, the groups' queue lengths, the
// LAUNCHED queue and the restore set (a few pipelined reads) and sets the
// gauges.
func (r *Engine) refreshStats(ctx context.Context) error {
	sv, err := r.st.Slots(ctx)
	if err != nil {
		return err
	}
	groups, err := r.st.ListGroups(ctx)
	if err != nil {
		return err
	}
	q, err := r.st.Queues(ctx)
	if err != nil {
		return fmt.Errorf("host: stats: %w", err)
	}
	v := &statsView{At: time.Now(), SlotsFree: sv.Free, SlotsAssigned: sv.Assigned, Workers: len(sv.Workers),
		Launched: q.Launched, Restore: q.Restore}
	for _, w := range sv.Workers {
		if w.Alive {
			v.WorkersAlive++
		}
	}
	active := 0
	for _, g := range groups {
		v.Waiting += g.Waiting
		active += g.Active
	}
	v.Running = max(active-v.Launched, 0)
	r.stats.Store(v)
	ns := r.m.ns
	r.m.slots.WithLabelValues(ns, "free").Set(float64(v.SlotsFree))
	r.m.slots.WithLabelValues(ns, "assigned").Set(float64(v.SlotsAssigned))
	r.m.runs.WithLabelValues(ns, string(storage.StateWaiting)).Set(float64(v.Waiting))
	r.m.runs.WithLabelValues(ns, string(storage.StateLaunched)).Set(float64(v.Launched))
	r.m.runs.WithLabelValues(ns, string(storage.StateRunning)).Set(float64(v.Running))
	r.m.runs.WithLabelValues(ns, "RESTORE").Set(float64(v.Restore))
	return nil
}

// statsFresh refreshes the gauges when they are older than StatsInterval
// and this host leads: a scrape or /status pays for the reads, an engine
// nobody watches reads nothing. Bounded by statsTimeout.
func (r *Engine) statsFresh() {
	lease := r.statsLease.Load()
	if lease == nil || !lease.Valid() || r.cfg.StatsInterval < 0 {
		return
	}
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	if v := r.stats.Load(); v != nil && time.Since(v.At) < r.cfg.StatsInterval {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	if err := r.refreshStats(ctx); err != nil {
		r.log.Debug("stats refresh failed", "err", err)
	}
}

// statsTimeout bounds one on-demand stats refresh.
const statsTimeout = 2 * time.Second

// runStats is the stats LeaderTask: it makes the gauges this term's
// (statsFresh refreshes them on demand) and removes them when the term
// ends (a standby exports none).
func (r *Engine) runStats(ctx context.Context, lease *leader.Lease) error {
	r.statsLease.Store(lease)
	<-ctx.Done()
	r.statsLease.CompareAndSwap(lease, nil)
	r.statsMu.Lock()
	r.stats.Store(nil)
	r.m.slots.Reset()
	r.m.runs.Reset()
	r.statsMu.Unlock()
	return nil
}

// statsCollector exports the slots and runs gauges, refreshed on demand.
type statsCollector struct{ r *Engine }

func (c statsCollector) Describe(ch chan<- *prometheus.Desc) {
	c.r.m.slots.Describe(ch)
	c.r.m.runs.Describe(ch)
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	c.r.statsFresh()
	c.r.m.slots.Collect(ch)
	c.r.m.runs.Collect(ch)
}

// Status returns the runtime section of /status.
func (r *Engine) Status() *RuntimeStatus {
	rs := &RuntimeStatus{
		Coordinators:    r.cfg.Coordinators,
		Policies:        r.set.Loaded(),
		Counters:        r.Counts(),
		LastPass:        timePtr(r.coord.LastPass()),
		LastSlotPass:    timePtr(r.slots.LastPass()),
		LastRestorePass: timePtr(r.restore.LastPass()),
		RestorePending:  r.restore.Pending(),
	}
	r.statsFresh()
	if v := r.stats.Load(); v != nil {
		rs.Stats = &StatsStatus{At: v.At, SlotsFree: v.SlotsFree, SlotsAssigned: v.SlotsAssigned, Workers: v.Workers,
			WorkersAlive: v.WorkersAlive, Waiting: v.Waiting, Launched: v.Launched, Running: v.Running, RestoreQueue: v.Restore}
	}
	return rs
}
