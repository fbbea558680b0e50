package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/host/internal/engine"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// BalanceConfig configures how a Multi spreads leadership. The rule: with
// M namespaces in this host's list and N hosts alive (the advisory presence
// set storage.HostsKey, refreshed every Interval with a PresenceTTL expiry),
// the target is ceil(M/N) + Slack. A host that has led more than the
// target for a whole PresenceTTL (so a dead host no longer counts as alive)
// resigns one namespace (graceful release: the lock is deleted and the
// release published, so a standby takes it at once), then waits Cooldown
// before resigning another; it does not compete for a namespace it resigned
// for Holdoff (unless the namespace stays without a leader: then it competes
// again after two retry intervals). A host that leads target or more
// namespaces, counting its campaigns in flight as won, is reluctant: it
// waits one more retry interval before each campaign, so hosts below the
// target win free locks first, and a host below the target does not take
// every namespace freed at once. Balancing never
// stops a namespace from being led: it only changes who leads.
type BalanceConfig struct {
	// Disabled turns balancing off (every host competes for everything).
	Disabled bool
	// Interval between two balance checks; default LeaseTTL/2.
	Interval time.Duration
	// Slack is added to ceil(M/N); default 0.
	Slack int
	// Cooldown is the minimum time between two resignations; default
	// Interval (one resignation per balance check at most).
	Cooldown time.Duration
	// Holdoff is how long a resigned namespace is not competed for;
	// default 4*LeaseTTL.
	Holdoff time.Duration
	// PresenceTTL is how long a host counts as alive after its last
	// presence refresh; default 3*Interval.
	PresenceTTL time.Duration
}

// MultiConfig configures a Multi: one Host per namespace in one process.
type MultiConfig struct {
	// Client is the shared Redis client (single node, Sentinel or Cluster).
	Client redis.UniversalClient
	// Namespaces to compete for (validated, no duplicates, at least one).
	Namespaces []string
	// Host is the template of every namespace's Host. Store, Registry and
	// Admin are ignored (a Store per namespace, a Registry per namespace
	// gathered by the shared admin server). Identity is shared by all the
	// namespaces (default storage.NewIdentity(Advertise)). Unless
	// Host.Engine.Policies is set, one wasm runtime is created and shared
	// by all namespaces; either way each policy version is loaded once for
	// all namespaces (one instance pool per version), and closed when the
	// last namespace lets go of it.
	Host Config
	// Admin, if not nil, is where the shared admin server listens: /healthz,
	// /readyz (every namespace ready), /metrics (all namespaces) and
	// /status (JSON: identity, balance, and every namespace's Status;
	// ?namespace=NS for one).
	Admin net.Listener
	// Balance is the leadership-balancing rule.
	Balance BalanceConfig
}

// Multi runs one Host (elector + leader tasks) per namespace in one
// process, sharing the Redis client, the wasm runtime and the admin server.
type Multi struct {
	cfg      MultiConfig
	identity string
	log      *slog.Logger
	hosts    []*Host
	byNS     map[string]*Host
	wasm     *policies.Runtime
	share    *engine.Share // loaded versions, shared by the namespaces
	ownsWasm bool
	reg      *prometheus.Registry

	ledGauge   prometheus.Gauge
	aliveGauge prometheus.Gauge
	targetG    prometheus.Gauge
	releases   prometheus.Counter

	mu          sync.Mutex
	alive       int
	target      int
	lastRelease time.Time
	resigned    map[string]time.Time
	inflight    int       // campaigns between beginCampaign and endCampaign
	overSince   time.Time // since when this host leads more than its target
	closeOnce   sync.Once
}

// Validate checks the config as given (zero fields are defaults): a
// client, at least one valid namespace listed once, no negative balance
// setting, a usable Host template (its Store, Registry and Admin are
// ignored) and Engine.
func (c MultiConfig) Validate() error {
	if c.Client == nil {
		return errors.New("host: multi: Client is required")
	}
	if len(c.Namespaces) == 0 {
		return errors.New("host: multi: no namespaces")
	}
	seen := map[string]bool{}
	for _, ns := range c.Namespaces {
		if err := limits.ValidateName("namespace", ns); err != nil {
			return fmt.Errorf("host: multi: %w", err)
		}
		if seen[ns] {
			return fmt.Errorf("host: multi: namespace %q listed twice", ns)
		}
		seen[ns] = true
	}
	if b := c.Balance; b.Slack < 0 || b.Interval < 0 || b.Cooldown < 0 || b.Holdoff < 0 || b.PresenceTTL < 0 {
		return errors.New("host: multi: negative balance setting")
	}
	probe := c.Host
	probe.Store, _ = storage.New(c.Client, c.Namespaces[0]) // the template is validated with a placeholder store
	return probe.Validate()
}

// NewMulti validates cfg and builds the hosts (and runtimes); it does not
// talk to Redis until Run. Close it after Run returned.
func NewMulti(ctx context.Context, cfg MultiConfig) (*Multi, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := cfg.Host
	base.Registry, base.Admin = nil, nil
	base.Store, _ = storage.New(cfg.Client, cfg.Namespaces[0]) // a placeholder: each Host gets its own
	base = base.withDefaults()                                 // fills Identity, Advertise, LeaseTTL, Logger...
	b := &cfg.Balance
	if b.Interval == 0 {
		b.Interval = base.LeaseTTL / 2
	}
	if b.Cooldown == 0 {
		b.Cooldown = b.Interval
	}
	if b.Holdoff == 0 {
		b.Holdoff = 4 * base.LeaseTTL
	}
	if b.PresenceTTL == 0 {
		b.PresenceTTL = 3 * b.Interval
	}
	m := &Multi{cfg: cfg, identity: base.Identity, log: base.Logger.With("identity", base.Identity),
		byNS: map[string]*Host{}, resigned: map[string]time.Time{}, alive: 1}
	m.reg = prometheus.NewRegistry()
	m.ledGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmsched_namespaces_led", Help: "Namespaces this host leads now."})
	m.aliveGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmsched_hosts_alive", Help: "Hosts present in the balancing presence set at the last check."})
	m.targetG = prometheus.NewGauge(prometheus.GaugeOpts{Name: "wasmsched_namespaces_target", Help: "Balancing target: ceil(namespaces/hosts alive) + slack."})
	m.releases = prometheus.NewCounter(prometheus.CounterOpts{Name: "wasmsched_balance_releases_total", Help: "Namespaces resigned by the balancer."})
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.ledGauge, m.aliveGauge, m.targetG, m.releases)

	m.wasm = base.Engine.Policies
	if m.wasm == nil {
		var err error
		m.wasm, err = policies.NewRuntime(ctx, engine.Config(base.Engine).PolicyConfig(base.Logger))
		if err != nil {
			return nil, fmt.Errorf("host: multi: %w", err)
		}
		m.ownsWasm = true
	}
	m.share = engine.NewShare(m.wasm)
	for _, ns := range cfg.Namespaces {
		st, err := storage.New(cfg.Client, ns)
		if err != nil {
			m.Close(ctx)
			return nil, err
		}
		hc := base
		hc.Store = st
		hc.Registry = prometheus.NewRegistry()
		hc.Logger = base.Logger
		hc.Engine.Policies, hc.share = m.wasm, m.share
		h, err := New(ctx, hc)
		if err != nil {
			m.Close(ctx)
			return nil, err
		}
		h.elector.SetCampaignHooks(m.beginCampaign, m.endCampaign)
		h.noHint = true
		m.hosts = append(m.hosts, h)
		m.byNS[ns] = h
	}
	return m, nil
}

// Identity is the identity stamp shared by every namespace's elector.
func (m *Multi) Identity() string { return m.identity }

// Leading lists the namespaces this process leads now (configured order).
func (m *Multi) Leading() []string {
	var out []string
	for _, h := range m.hosts {
		if h.Leading() {
			out = append(out, h.ns)
		}
	}
	return out
}

// Target is the last balancing target and the hosts alive it came from.
func (m *Multi) targetNow() (target, alive int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.target, m.alive
}

// Gatherer gathers the shared and every namespace's metrics.
func (m *Multi) gatherer() prometheus.Gatherer {
	gs := prometheus.Gatherers{m.reg}
	for _, h := range m.hosts {
		gs = append(gs, h.cfg.Registry)
	}
	return gs
}

// Run registers the namespaces (storage.NamespacesKey), serves the admin
// server (if configured), runs every namespace's Host and the balancer until
// ctx is cancelled. On return every leader task has stopped and every lock
// held was released.
func (m *Multi) Run(ctx context.Context) error {
	if err := storage.RegisterNamespaces(ctx, m.cfg.Client, m.cfg.Namespaces...); err != nil {
		m.log.Warn("namespace registry: register failed (advisory)", "err", err)
	}
	if m.cfg.Admin != nil {
		a := serveAdmin(m.cfg.Admin, m.adminHandler(), m.log) // admin.go
		defer a.close()
	}
	m.log.Info("multi-namespace host started", "namespaces", len(m.hosts), "balance", !m.cfg.Balance.Disabled)
	if len(m.hosts) > 0 {
		compactHint(ctx, m.hosts[0].cfg.Store, m.log)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(m.hosts))
	for i, h := range m.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Run(ctx)
		}()
	}
	if !m.cfg.Balance.Disabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.balanceLoop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes the runtimes and the shared wasm runtime (after Run).
func (m *Multi) Close(ctx context.Context) error {
	var err error
	m.closeOnce.Do(func() {
		for _, h := range m.hosts {
			err = errors.Join(err, h.Close(ctx))
		}
		if m.ownsWasm && m.wasm != nil {
			err = errors.Join(err, m.wasm.Close(ctx))
		}
	})
	return err
}

// beginCampaign counts one campaign in flight and reports whether this
// process is reluctant: it leads its target already, counting the
// campaigns in flight as won. Counting those is what keeps a host below
// the target from taking every namespace freed at once (a peer's lease
// losses, a burst of releases): its first target-minus-leading campaigns
// go ahead, the rest wait a retry interval so peers get their chance.
func (m *Multi) beginCampaign() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	reluctant := !m.cfg.Balance.Disabled && m.target > 0 && len(m.Leading())+m.inflight >= m.target
	m.inflight++
	return reluctant
}

// endCampaign ends a campaign counted by beginCampaign.
func (m *Multi) endCampaign() {
	m.mu.Lock()
	m.inflight--
	m.mu.Unlock()
}

func (m *Multi) balanceLoop(ctx context.Context) {
	defer func() {
		// Leave the presence set at once on shutdown.
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = storage.NewHosts(m.cfg.Client).Leave(rctx, m.identity)
	}()
	t := time.NewTicker(m.cfg.Balance.Interval)
	defer t.Stop()
	for {
		m.balanceOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// BalanceOnce refreshes this host's presence, recomputes the target and
// resigns at most one namespace if it leads more than the target and the
// cooldown has passed. It returns the namespace resigned, if any.
func (m *Multi) balanceOnce(ctx context.Context) string {
	b := m.cfg.Balance
	alive, err := storage.NewHosts(m.cfg.Client).Beat(ctx, m.identity, b.PresenceTTL)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("balance: presence update failed", "err", err)
		}
		return ""
	}
	mns := len(m.hosts)
	target := (mns+alive-1)/alive + b.Slack
	leading := m.Leading()
	m.ledGauge.Set(float64(len(leading)))
	m.aliveGauge.Set(float64(alive))
	m.targetG.Set(float64(target))

	m.mu.Lock()
	defer m.mu.Unlock()
	m.alive, m.target = alive, target
	if len(leading) <= target {
		m.overSince = time.Time{}
		return ""
	}
	// Over the target: resign only once that has lasted a whole presence
	// TTL. A host that died still counts as alive for up to PresenceTTL,
	// while its namespaces move to the survivors as soon as its leases run
	// out; without this the survivors, briefly over the stale target,
	// would resign namespaces no host below the target exists to take.
	if m.overSince.IsZero() {
		m.overSince = time.Now()
	}
	if time.Since(m.overSince) < b.PresenceTTL || time.Since(m.lastRelease) < b.Cooldown {
		return ""
	}
	ns := leading[rand.IntN(len(leading))]
	h := m.byNS[ns]
	if !h.elector.Resign(fmt.Sprintf("resigned for balance: leading %d > target %d (%d namespaces, %d hosts alive)",
		len(leading), target, mns, alive), b.Holdoff) {
		return ""
	}
	m.lastRelease = time.Now()
	m.resigned[ns] = m.lastRelease
	m.releases.Inc()
	m.log.Info("balance: resigned namespace", "namespace", ns, "leading", len(leading), "target", target, "hosts_alive", alive)
	return ns
}

// MultiStatus is the shared admin server's /status.
type MultiStatus struct {
	Identity    string   `json:"identity"`
	Namespaces  int      `json:"namespaces"`
	Leading     []string `json:"leading"`
	Target      int      `json:"target"`
	HostsAlive  int      `json:"hosts_alive"`
	Balance     bool     `json:"balance"`
	PerNS       []Status `json:"namespace_status"`
	ResignedRec []string `json:"recently_resigned,omitempty"`
}

// Status returns the process's multi-namespace view.
func (m *Multi) Status() MultiStatus {
	target, alive := m.targetNow()
	s := MultiStatus{Identity: m.identity, Namespaces: len(m.hosts), Leading: m.Leading(), Target: target,
		HostsAlive: alive, Balance: !m.cfg.Balance.Disabled}
	if s.Leading == nil {
		s.Leading = []string{}
	}
	for _, h := range m.hosts {
		s.PerNS = append(s.PerNS, h.Status())
	}
	m.mu.Lock()
	for ns, at := range m.resigned {
		if time.Since(at) < m.cfg.Balance.Holdoff {
			s.ResignedRec = append(s.ResignedRec, ns)
		}
	}
	m.mu.Unlock()
	slices.Sort(s.ResignedRec)
	return s
}

// AdminHandler is the shared admin server's handler.
func (m *Multi) adminHandler() *http.ServeMux {
	notReady := func() string {
		for _, h := range m.hosts {
			if !h.ready() {
				return "not ready: namespace " + h.ns
			}
		}
		return ""
	}
	return adminMux(notReady, m.gatherer(), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if ns := r.URL.Query().Get("namespace"); ns != "" {
			h := m.byNS[ns]
			if h == nil {
				http.Error(w, "unknown namespace "+strconv.Quote(ns), http.StatusNotFound)
				return
			}
			_ = enc.Encode(h.Status())
			return
		}
		_ = enc.Encode(m.Status())
	})
}
