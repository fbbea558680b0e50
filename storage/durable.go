package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/errs"
)

// Durable acknowledgements: when the Redis master has replicas, every
// script that writes is followed, on the same connection and in the same
// pipeline, by WAIT 1 TIMEOUT, and the call fails with ErrNotReplicated
// unless a replica acknowledged it. Replication is asynchronous: without
// this, a write the master acknowledged can be gone after a failover to a
// replica that had not received it (RATIONALE.md "Why durable
// acknowledgements, ...?").

// Durability modes (the redis URL's durable= parameter).
const (
	// durableAuto waits for one replica when the master has one connected
	// or had one less than durableRecheck ago (INFO replication, read at
	// most every durableRecheck while the store writes, a second after a
	// WAIT no replica answered; never while idle): a replica that just
	// dropped its link is still waited for (writes fail ErrNotReplicated)
	// for durableRecheck. A new master (a failover: another master_replid) starts with
	// no history, so a promoted replica left alone is not waited for. The
	// default.
	durableAuto = "auto"
	// DurableOn always waits for one replica: without one every write
	// fails with ErrNotReplicated.
	DurableOn = "on"
	// DurableOff never waits (single node, or speed first).
	DurableOff = "off"
)

// Durability defaults.
const (
	// defaultDurableTimeout bounds one WAIT.
	defaultDurableTimeout = time.Second
	// durableRecheck is how often durableAuto re-reads the replica count.
	durableRecheck = 10 * time.Second
)

// ErrNotReplicated: the write was made on the master but no replica
// acknowledged it within the durable timeout, so a failover could still
// lose it. It is reported as not done: the caller retries (a submit with an
// idempotency key is safe to retry; a fenced leader write is re-decided on
// the next pass; a worker keeps its report and sends it again).
var ErrNotReplicated = errs.ErrNotReplicated

// Durability is how a Store waits for replicas. The zero value is
// durableAuto with defaultDurableTimeout.
type Durability struct {
	Mode    string        // durableAuto ("" too), DurableOn or DurableOff
	Timeout time.Duration // one WAIT's bound; 0 = defaultDurableTimeout
}

// Validate checks the mode and the timeout.
func (d Durability) Validate() error {
	switch d.Mode {
	case "", durableAuto, DurableOn, DurableOff:
	default:
		return fmt.Errorf("storage: durable=%q: want auto, on or off: %w", d.Mode, ErrInvalid)
	}
	if d.Timeout < 0 || (d.Timeout > 0 && d.Timeout < time.Millisecond) || d.Timeout > time.Minute {
		return fmt.Errorf("storage: durable_timeout=%v: want 1ms..1m: %w", d.Timeout, ErrInvalid)
	}
	return nil
}

func (d Durability) withDefaults() Durability {
	if d.Mode == "" {
		d.Mode = durableAuto
	}
	if d.Timeout == 0 {
		d.Timeout = defaultDurableTimeout
	}
	return d
}

// readOnly lists the scripts that write nothing: no WAIT after them.
var readOnly = map[string]bool{
	"snapshot":        true,
	"timers":          true,
	"expired_workers": true,
	"restore_check":   true,
}

// durableState is a Store's durability: the mode and, for durableAuto, the
// replica count last read.
type durableState struct {
	cfg      atomic.Pointer[Durability] // SetDurability may change it while calls run
	mu       sync.Mutex                 // one INFO at a time
	checked  atomic.Int64               // unix ns of the last replica count read; 0 = never
	replicas atomic.Int64               // at the last read
	seen     atomic.Int64               // unix ns of the last read that counted a replica on this master; 0 = none
	replid   atomic.Value               // string: the master's master_replid at the last read
}

// soon makes the next write re-read the replica count (if the last read
// is more than 100 ms old): a WAIT that no replica answered may mean a
// failover to a master without replicas (a new master_replid), which
// should not be waited for.
func (d *durableState) soon() {
	t := d.checked.Load()
	if early := time.Now().Add(-durableRecheck + 100*time.Millisecond).UnixNano(); t > early {
		d.checked.CompareAndSwap(t, early)
	}
}

func (d *durableState) get() Durability {
	if c := d.cfg.Load(); c != nil {
		return *c
	}
	return Durability{}.withDefaults()
}

// wants reports whether durableAuto waits: a replica now, or one on this
// master less than durableRecheck ago.
func (d *durableState) wants() bool {
	if d.replicas.Load() > 0 {
		return true
	}
	seen := d.seen.Load()
	return seen != 0 && time.Since(time.Unix(0, seen)) < durableRecheck
}

// durableClient is what Connect returns for a URL with durable= or
// durable_timeout=: the client, remembering them for New.
type durableClient struct {
	redis.UniversalClient
	d Durability
}

// setDurability sets how the store waits for replicas (the URL's durable=
// parameters do this for stores made with New on a Connect client). Calls
// in flight may use either setting; stores made from Redis() afterwards get
// the new one. Set it before handing Redis() to other views.
func (s *Store) setDurability(d Durability) error {
	if err := d.Validate(); err != nil {
		return err
	}
	d = d.withDefaults()
	s.dur.cfg.Store(&d)
	s.dur.checked.Store(0)
	s.given = &durableClient{UniversalClient: s.c, d: d}
	return nil
}

// durability returns the store's durability setting.
func (s *Store) durability() Durability { return s.dur.get() }

// Durable reports whether the store's writes wait for a replica now (for
// durableAuto it may read the replica count: INFO replication).
func (s *Store) Durable(ctx context.Context) bool { return s.waitsFor(ctx, "") }

// waitBound is a context key: a per-call bound on the WAIT after a script
// (waitBounded), 0 = no WAIT at all.
type waitBound struct{}

// waitBounded makes the scripts called with ctx wait at most d for a
// replica (d <= 0: not at all), e.g. a worker heartbeat bounded by its
// TTL, whose liveness write is not an acknowledgement.
func waitBounded(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, waitBound{}, max(d, 0))
}

// waitTimeout is one WAIT's bound for ctx.
func (s *Store) waitTimeout(ctx context.Context) time.Duration {
	t := s.dur.get().Timeout
	if b, ok := ctx.Value(waitBound{}).(time.Duration); ok && b > 0 && b < t {
		t = b
	}
	return t
}

// waitsFor reports whether script name is followed by WAIT ("" = any write).
func (s *Store) waitsFor(ctx context.Context, name string) bool {
	if b, ok := ctx.Value(waitBound{}).(time.Duration); ok && b <= 0 {
		return false
	}
	switch {
	case readOnly[name]:
		return false
	case s.dur.get().Mode == DurableOff:
		return false
	case s.dur.get().Mode == DurableOn:
		return true
	}
	if t := s.dur.checked.Load(); t != 0 && time.Since(time.Unix(0, t)) < durableRecheck {
		return s.dur.wants()
	}
	if !s.dur.mu.TryLock() {
		if s.dur.checked.Load() != 0 {
			return s.dur.wants() // another call is re-reading it
		}
		s.dur.mu.Lock() // the first read: everyone waits for it
	}
	defer s.dur.mu.Unlock()
	if t := s.dur.checked.Load(); t != 0 && time.Since(time.Unix(0, t)) < durableRecheck {
		return s.dur.wants()
	}
	n, replid, err := s.countReplicas(ctx)
	last, _ := s.dur.replid.Load().(string)
	switch {
	case err != nil:
		// Unknown (INFO refused by an ACL, a store without INFO): keep the
		// last answer, and do not wait the first time.
		n = s.dur.replicas.Load()
	case replid != last:
		// The first read, or another master (a failover promoted a
		// replica: a new replication ID): no history to keep.
		s.dur.seen.Store(0)
		s.dur.replid.Store(replid)
	}
	if n > 0 {
		s.dur.seen.Store(time.Now().UnixNano())
	}
	s.dur.replicas.Store(n)
	s.dur.checked.Store(time.Now().UnixNano())
	return s.dur.wants()
}

// countReplicas reads connected_slaves and master_replid from the
// master's INFO replication.
func (s *Store) countReplicas(ctx context.Context) (n int64, replid string, err error) {
	c, err := s.writer(ctx)
	if err != nil {
		return 0, "", err
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, "", fmt.Errorf("storage: info replication: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, "", fmt.Errorf("storage: info replication: connected_slaves %q", v)
			}
		}
		if v, ok := strings.CutPrefix(line, "master_replid:"); ok {
			replid = v
		}
	}
	return n, replid, nil
}

// writer is the connection durable writes go through: the client, or on
// Redis Cluster the master of the namespace's shard (WAIT has no key, so a
// cluster client would send it to any node).
func (s *Store) writer(ctx context.Context) (redis.Cmdable, error) {
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, s.k.Fence())
		if err != nil {
			return nil, fmt.Errorf("storage: shard of namespace %s: %w", s.ns, err)
		}
		return n, nil
	}
	return s.c, nil
}

// waitArgs is the WAIT command appended to a durable pipeline.
func (s *Store) waitCmd(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	return p.Do(ctx, "WAIT", 1, max(s.waitTimeout(ctx).Milliseconds(), 1))
}

// notReplicated is the error of a write WAIT did not confirm (and asks
// for a fresh replica count soon).
func (s *Store) notReplicated(ctx context.Context, op string, w *redis.Cmd) error {
	s.dur.soon()
	if err := w.Err(); err != nil {
		return fmt.Errorf("storage: %s: wait for a replica: %w: %w", op, err, ErrNotReplicated)
	}
	return fmt.Errorf("storage: %s: no replica acknowledged the write within %v (it is on the master only and a failover could lose it): %w",
		op, s.waitTimeout(ctx), ErrNotReplicated)
}

// runDurable is run for a writing script when the store waits for
// replicas: EVALSHA and WAIT in one pipeline on one connection.
func (s *Store) runDurable(ctx context.Context, op, name string, sc *redis.Script, keys []string, args []any) (any, error) {
	c, err := s.writer(ctx)
	if err != nil {
		return nil, err
	}
	send := func() (*redis.Cmd, *redis.Cmd) {
		var ev *redis.Cmd
		var w *redis.Cmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			ev = sc.EvalSha(ctx, p, keys, args...)
			w = s.waitCmd(ctx, p)
			return nil
		})
		return ev, w
	}
	ev, w := send()
	if err := ev.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if lerr := sc.Load(ctx, c).Err(); lerr != nil {
			return nil, fmt.Errorf("storage: %s: reload script %s: %w", op, name, lerr)
		}
		ev, w = send()
	}
	v, err := ev.Result()
	if err == redis.Nil {
		v, err = nil, nil
	}
	if err != nil {
		return nil, s.noteRefusal(scriptErr(op, err))
	}
	if n, err := w.Int64(); err != nil || n < 1 {
		return v, s.notReplicated(ctx, op, w)
	}
	return v, nil
}

// fromConnect returns the durability a Connect client carries.
func fromConnect(c redis.UniversalClient) (redis.UniversalClient, Durability, bool) {
	if dc, ok := c.(*durableClient); ok {
		return dc.UniversalClient, dc.d, true
	}
	return c, Durability{}, false
}

// cutDurable removes durable= and durable_timeout= from a URL's query
// parts and returns them.
func cutDurable(s string) (string, Durability, bool, error) {
	var d Durability
	found := false
	qi := strings.IndexByte(s, '?')
	if qi < 0 {
		return s, d, false, nil
	}
	// Queries may follow any seed of a comma list: walk every "?..." part
	// up to the next ',' (a seed separator) or the end.
	var out strings.Builder
	rest := s
	for {
		qi := strings.IndexByte(rest, '?')
		if qi < 0 {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:qi])
		end := strings.IndexByte(rest[qi:], ',')
		var q string
		if end < 0 {
			q, rest = rest[qi+1:], ""
		} else {
			q, rest = rest[qi+1:qi+end], rest[qi+end:]
		}
		var kept []string
		for _, kv := range strings.Split(q, "&") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "durable":
				d.Mode, found = strings.ToLower(v), true
			case "durable_timeout":
				t, err := time.ParseDuration(v)
				if err != nil {
					return "", d, false, fmt.Errorf("durable_timeout=%q is not a duration (e.g. 500ms, 2s)", v)
				}
				d.Timeout, found = t, true
			default:
				if kv != "" {
					kept = append(kept, kv)
				}
			}
		}
		if len(kept) > 0 {
			out.WriteString("?" + strings.Join(kept, "&"))
		}
		if rest == "" {
			break
		}
	}
	if found {
		if err := d.Validate(); err != nil {
			return "", d, false, fmt.Errorf("%s", strings.TrimSuffix(strings.TrimPrefix(err.Error(), "storage: "), ": invalid"))
		}
	}
	return out.String(), d, found, nil
}

// forceWrite is the heartbeat's ARGV[4]: "1" when the store waits for
// replicas (the beat must propagate for its WAIT to cover what the worker
// read before it), else "0".
func (s *Store) forceWrite(ctx context.Context) string {
	if s.waitsFor(ctx, "heartbeat") {
		return "1"
	}
	return "0"
}
