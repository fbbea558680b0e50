package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
)

// Hot swap and auto-rollback (GitHub issue 6).
//
// Every host (leader or standby) subscribes to the namespace's policy
// channel (keyspace.Keys.PolicyChannel; push, activate, rollback and
// auto-rollback PUBLISH "name version gen"). On a message it refreshes its
// PolicySet (one GET of the generation, then the names in use are resolved
// again) and pre-loads the named policy's active version, so the leader's
// next decision does not pay the compilation and a standby that takes over
// is warm. The coordinator's per-pass generation check stays the safety net
// for a missed message; after every (re)subscription the subscriber
// refreshes once too. Decisions in flight finish on the version they
// acquired; a retired version is closed by the last Release.
//
// A pushed version that fails RollbackAfter decisions in a row (trap,
// timeout, invalid decision; a valid decision resets the count) is rolled
// back with storage.Store.AutoRollbackPolicy, which only acts while that
// version is still active, so several hosts reacting at once roll back once.

// DefaultRollbackAfter is the default EngineConfig.RollbackAfter.
const DefaultRollbackAfter = 5

// rollbackMetrics are the hot-swap collectors.
type rollbackMetrics struct {
	ns        string
	rollbacks *prometheus.CounterVec // policy, outcome
	swaps     *prometheus.CounterVec // trigger
}

func newRollbackMetrics(reg prometheus.Registerer, ns string) (*rollbackMetrics, error) {
	m := &rollbackMetrics{
		ns: ns,
		rollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_policy_auto_rollbacks_total",
			Help: "Automatic rollbacks attempted by this host after consecutive failures of a pushed policy version, by policy and outcome (rolled_back; not_active: another host or an operator changed it first; error).",
		}, []string{"namespace", "policy", "outcome"}),
		swaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmsched_policy_refreshes_total",
			Help: "Policy registry changes this host picked up, by trigger (message: the policy channel; subscribe: a (re)subscription; the coordinator's per-pass generation check is not counted here).",
		}, []string{"namespace", "trigger"}),
	}
	for _, c := range []prometheus.Collector{m.rollbacks, m.swaps} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("host: register hot-swap metrics: %w", err)
		}
	}
	for _, oc := range []string{"message", "subscribe"} {
		m.swaps.WithLabelValues(ns, oc)
	}
	return m, nil
}

// rollbackReason is the history note of an auto-rollback (no unit
// separator, bounded).
func rollbackReason(n int, r *PolicyRef, outcome string, cause error) string {
	msg := ""
	if cause != nil {
		// Keep the error and the first line of the guest's output (a Go
		// guest's panic message); drop the wasm stack trace.
		msg = cause.Error()
		guest := ""
		if i := strings.Index(msg, "; guest output:"); i >= 0 {
			guest = strings.TrimSpace(msg[i+len("; guest output:"):])
			guest, _, _ = strings.Cut(guest, "\n")
			msg = msg[:i]
		}
		if i := strings.Index(msg, "wasm stack trace"); i >= 0 {
			msg = strings.TrimSpace(msg[:i])
		}
		if guest != "" {
			msg += " (guest: " + guest + ")"
		}
	}
	reason := fmt.Sprintf("%d consecutive failed decisions of version %d (%s); last: %s", n, r.Registry, r.Version, outcome)
	if msg != "" {
		reason += ": " + msg
	}
	reason = strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, reason)
	if len(reason) > 300 {
		reason = reason[:300] + "..."
	}
	return reason
}

// hotSwap is the per-runtime policy-channel subscriber.
type hotSwap struct {
	r      *Engine
	bus    *leader.Bus
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// run handles the policy channel's events until ctx ends. A confirmed
// (re)subscription triggers a refresh (messages may have been missed while
// disconnected; the Bus reconnects and resubscribes by itself), a message
// a refresh of the policy it names.
func (hs *hotSwap) run(ctx context.Context) {
	defer close(hs.done)
	r := hs.r
	ch := keyspace.Of(r.st).PolicyChannel()
	events, unsubscribe := hs.bus.Subscribe(ch)
	defer unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if ev.Subscribed {
				r.log.Debug("subscribed to the policy channel", "channel", ch)
				hs.refresh(ctx, "subscribe", "")
				continue
			}
			name, _, _ := strings.Cut(ev.Payload, " ")
			hs.refresh(ctx, "message", name)
		}
	}
}

// refresh picks up a registry change and pre-loads name's active version,
// then wakes the coordinator (an activation marks every group dirty; a
// failed refresh is retried by its pass).
func (hs *hotSwap) refresh(ctx context.Context, trigger, name string) {
	r := hs.r
	defer wakeUp(r.coord.wake)
	defer r.coord.readDirty()  // (runs before the wake) every group is dirty: read them
	defer wakeUp(r.slots.wake) // a new allocation policy orders the queue at once
	t0 := time.Now()
	changed, err := r.set.Refresh(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("policy refresh failed (the coordinator's next pass retries)", "trigger", trigger, "err", err)
		}
		return
	}
	if changed {
		r.coord.clearBackoff()
		r.set.rb.swaps.WithLabelValues(r.set.rb.ns, trigger).Inc()
	}
	if name == "" || limits.ValidateName("policy", name) != nil {
		return
	}
	lp, err := r.set.Preload(ctx, name)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, policies.ErrClosed) {
			r.log.Warn("policy pre-load failed", "policy", name, "err", err)
		}
		return
	}
	r.log.Info("policy version ready", "policy", name, "version", lp.Version, "registry_version", lp.Registry,
		"generation", r.set.Generation(), "trigger", trigger, "took", time.Since(t0).Round(time.Microsecond))
}
