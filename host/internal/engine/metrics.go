package engine

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Decision outcomes (label "outcome" of wasmsched_decisions_total).
const (
	OutcomeApplied = "applied" // a non-empty decision was applied (or a replay was recognised: DUP)
	OutcomeSettled = "settled" // an empty decision marked the group clean
	OutcomeStale   = "stale"   // the group changed between snapshot and apply
	OutcomeFenced  = "fenced"  // the apply was rejected by the fence (demotion follows)
	OutcomeInvalid = "invalid" // the policy returned an invalid decision
	OutcomeTrap    = "trap"    // the policy trapped
	OutcomeTimeout = "timeout" // the policy exceeded its deadline
	OutcomeError   = "error"   // anything else: unknown policy, wrong kind, Redis error, bad state
)

// metrics are the runtime's Prometheus collectors (all labelled by namespace).
type metrics struct {
	ns          string
	decisions   *prometheus.CounterVec   // policy, version, outcome
	latency     *prometheus.HistogramVec // policy, kind
	stale       *prometheus.CounterVec   // op
	fenced      *prometheus.CounterVec   // task
	allocations *prometheus.CounterVec   // outcome
	restores    *prometheus.CounterVec   // outcome
	passes      *prometheus.CounterVec   // task
	lastPass    *prometheus.GaugeVec     // task
	slots       *prometheus.GaugeVec     // state
	runs        *prometheus.GaugeVec     // state
	loaded      *prometheus.GaugeVec     // policy, version
	drained     prometheus.Counter
	expired     prometheus.Counter
	due         prometheus.Counter
	retried     prometheus.Counter
	woken       prometheus.Counter
	fired       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, ns string) (*metrics, error) {
	m := &metrics{
		ns: ns,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_decisions_total",
			Help: "Serial decisions by policy, policy version (sha256 prefix) and outcome (applied, settled, stale, fenced, invalid, trap, timeout, error).",
		}, []string{"namespace", "policy", "version", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmsched_policy_call_seconds",
			Help:    "Latency of one policy decide call (wasm), by policy and kind.",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3},
		}, []string{"namespace", "policy", "kind"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_stale_total",
			Help: "Leader writes refused because the state changed since it was read (apply: group version; restore: slot re-verification).",
		}, []string{"namespace", "op"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_fenced_total",
			Help: "Leader writes refused by the fence (this host is no longer the leader), by leader task.",
		}, []string{"namespace", "task"}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_allocations_total",
			Help: "Slot allocations of LAUNCHED runs by outcome (allocated, no_slots, skipped, error, unfit: failed because it needs more slots than every live worker has).",
		}, []string{"namespace", "outcome"}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_restores_total",
			Help: "Failover restores of active runs by outcome (kept, reallocated, failed, no_slots, stale, skipped, error).",
		}, []string{"namespace", "outcome"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_leader_passes_total",
			Help: "Passes of the leader tasks (coordinator, slots, restore, drain, retention).",
		}, []string{"namespace", "task"}),
		lastPass: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmsched_leader_last_pass_timestamp_seconds",
			Help: "Unix time of the last pass of each leader task.",
		}, []string{"namespace", "task"}),
		slots: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmsched_slots",
			Help: "Slots of live workers by state (free, assigned); read from Redis when scraped (at most every StatsInterval) by the leader, absent on standbys.",
		}, []string{"namespace", "state"}),
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmsched_runs",
			Help: "Runs by state (WAITING, LAUNCHED, RUNNING = RUNNING+STOPPING) and the restore queue (RESTORE); read from Redis when scraped (at most every StatsInterval) by the leader, absent on standbys.",
		}, []string{"namespace", "state"}),
		loaded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmsched_policy_loaded",
			Help: "1 for each policy version loaded by this host (name, sha256 prefix).",
		}, []string{"namespace", "policy", "version"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "wasmsched_expired_runs_total",
			Help:        "Finished runs removed by the retention task (older than their group's retention).",
			ConstLabels: prometheus.Labels{"namespace": ns},
		}),
		due: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "wasmsched_due_runs_total",
			Help:        "Delayed runs (a not_before, a retry's backoff) the timer task moved into their group's queue when due.",
			ConstLabels: prometheus.Labels{"namespace": ns},
		}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "wasmsched_retries_total",
			Help:        "Runs the timer task put back in their group's queue for another attempt: an automatic retry whose backoff passed, or a run or group retry (of wasmsched_due_runs_total).",
			ConstLabels: prometheus.Labels{"namespace": ns},
		}),
		woken: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "wasmsched_wakes_total",
			Help:        "Policy wakes (ABI v4: a decision asked to be decided again at a time) the timer task fired: the group was decided again.",
			ConstLabels: prometheus.Labels{"namespace": ns},
		}),
		fired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "wasmsched_schedule_ticks_total",
			Help:        "Schedule ticks the timer task handled, by outcome: submitted, missed (skipped by the missed-tick rule), exists (the tick's run was there).",
			ConstLabels: prometheus.Labels{"namespace": ns},
		}, []string{"outcome"}),
		drained: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "wasmsched_drained_runs_total",
			Help:        "WAITING runs discarded by the drain task because a decision's discard_below covered them.",
			ConstLabels: prometheus.Labels{"namespace": ns},
		}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.latency, m.stale, m.fenced, m.allocations,
		m.restores, m.passes, m.lastPass, m.loaded, m.drained, m.expired, m.due, m.retried, m.woken, m.fired} { // slots, runs: statsCollector
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("host: register runtime metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) decision(policy, version, outcome string) {
	m.decisions.WithLabelValues(m.ns, policy, version, outcome).Inc()
}

func (m *metrics) call(policy, kind string, d time.Duration) {
	m.latency.WithLabelValues(m.ns, policy, kind).Observe(d.Seconds())
}

func (m *metrics) pass(task string, at time.Time) {
	m.passes.WithLabelValues(m.ns, task).Inc()
	m.lastPass.WithLabelValues(m.ns, task).Set(float64(at.UnixNano()) / 1e9)
}
