package storage

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// Store is the typed API over one namespace's Redis state. It is safe for
// concurrent use; every write goes through one Lua script.
type Store struct {
	c  redis.UniversalClient
	ns string
	k  keyspace.Keys

	// refused is when (unix ns, this process's clock) Redis last refused
	// one of this Store's scripts at maxmemory; 0 if never. The reaper
	// gives every worker a full heartbeat TTL after it (ReapDeadWorkers).
	refused atomic.Int64

	dur   durableState          // durable.go
	set   settingsCache         // settings.go
	given redis.UniversalClient // what New got (a Connect client carries its durability): Redis()
}

// New returns a Store for namespace (validated with ValidateName). It does
// not talk to Redis; call Load to preload scripts (optional). A client from
// Connect brings its URL's durability (durable=, durable_timeout=); any
// other client gets durableAuto (SetDurability changes it).
func New(c redis.UniversalClient, namespace string) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("storage: new: nil client: %w", ErrInvalid)
	}
	if err := limits.ValidateName("namespace", namespace); err != nil {
		return nil, err
	}
	given := c
	c, d, _ := fromConnect(c)
	st := &Store{c: c, ns: namespace, k: keyspace.New(namespace), given: given}
	d = d.withDefaults()
	st.dur.cfg.Store(&d)
	return st, nil
}

// Namespace returns the namespace name.
func (s *Store) Namespace() string { return s.ns }

// Redis returns the store's connection, so another view of the namespace
// (client.NewFromRedis, a worker) can share its pool; a Store made from it
// gets this one's durability.
func (s *Store) Redis() redis.UniversalClient { return s.given }

// Fence is a leader's authority: the epoch it got from BecomeLeader and its
// holder stamp. Every leader-authority write checks it inside the script.
type Fence struct {
	Epoch  int64
	Holder string
}

func (f Fence) args() []any { return []any{strconv.FormatInt(f.Epoch, 10), f.Holder} }

// BecomeLeader bumps the namespace epoch and records stamp as holder (and
// since = Redis TIME), only if the lock key (keyspace.Keys.Lock()) holds stamp;
// else ErrNotHolder and nothing is written. Use redislock without Metadata,
// so the lock value equals the stamp.
func (s *Store) BecomeLeader(ctx context.Context, stamp string) (int64, error) {
	if stamp == "" {
		return 0, invalid("become leader", "empty holder stamp")
	}
	v, err := s.run(ctx, "become leader", "become_leader", []string{s.k.Fence(), s.k.Lock()}, stamp)
	if err != nil {
		return 0, err
	}
	return toInt64(v), nil
}

// LeaderInfo describes the namespace's leader. Identity is "" when the lock
// is not held by the fence holder (lock absent, expired or moved); Epoch and
// Since are the fence's (the last leader's) even then.
type LeaderInfo struct {
	Identity string
	Epoch    int64
	Since    time.Time
}

// Leader reads the fence and the lock in one round trip.
func (s *Store) Leader(ctx context.Context) (LeaderInfo, error) {
	var (
		hm  *redis.SliceCmd
		get *redis.StringCmd
	)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		hm = p.HMGet(ctx, s.k.Fence(), "epoch", "holder", "since")
		get = p.Get(ctx, s.k.Lock())
		return nil
	})
	if err != nil && err != redis.Nil {
		return LeaderInfo{}, fmt.Errorf("storage: leader: %w", err)
	}
	vals := hm.Val()
	var li LeaderInfo
	li.Epoch = toInt64(vals[0])
	holder, _ := vals[1].(string)
	li.Since = msTime(toInt64(vals[2]))
	if lock := get.Val(); holder != "" && lock == holder {
		li.Identity = holder
	}
	return li, nil
}

// checkFence is a read-only check of f against the fence and the lock:
// ErrFenced unless f is the current leader's.
func (s *Store) checkFence(ctx context.Context, f Fence) error {
	li, err := s.Leader(ctx)
	if err != nil {
		return err
	}
	if li.Identity == "" || li.Identity != f.Holder || li.Epoch != f.Epoch {
		return fmt.Errorf("storage: check fence: epoch %d holder %s is not the leader (epoch %d, holder %q): %w",
			f.Epoch, f.Holder, li.Epoch, li.Identity, ErrFenced)
	}
	return nil
}

// toInt64 converts a script / HMGET value to int64 (0 if absent).
func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	case nil:
		return 0
	}
	return 0
}

// msTime converts unix ms to time.Time (zero for 0).
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
