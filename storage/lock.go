package storage

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// The leader lock and the namespace's queue counters: what the elector,
// the multi-namespace balancer and the slot manager read besides scripts,
// so no package outside storage sends Redis commands of its own.

// Locker returns a redislock client over the store's connection, for the
// namespace's leader lock (Keys.Lock).
func (s *Store) Locker() *redislock.Client { return redislock.New(s.c) }

// Subscribe opens a pub/sub connection on the store's client (channels may
// be given later with Subscribe on the result). The caller closes it.
func (s *Store) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return s.c.Subscribe(ctx, channels...)
}

// LockTTL returns the time left on the leader lock: 0 and false when
// nobody holds it.
func (s *Store) LockTTL(ctx context.Context) (time.Duration, bool, error) {
	d, err := s.c.PTTL(ctx, s.k.Lock()).Result()
	if err != nil {
		return 0, false, fmt.Errorf("storage: lock ttl: %w", err)
	}
	if d <= 0 { // -2: no key; -1: no expiry (not ours to judge)
		return 0, d == -1, nil
	}
	return d, true, nil
}

// LockHolder returns the identity stamp in the leader lock, "" if free.
func (s *Store) LockHolder(ctx context.Context) (string, error) {
	v, err := s.c.Get(ctx, s.k.Lock()).Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("storage: lock holder: %w", err)
	}
	return v, nil
}

// AnnounceRelease publishes "released IDENTITY" on Keys.LeaderEvents, so
// standbys campaign at once instead of at the lock's expiry.
func (s *Store) AnnounceRelease(ctx context.Context, identity string) error {
	if err := s.c.Publish(ctx, s.k.LeaderEvents(), "released "+identity).Err(); err != nil {
		return fmt.Errorf("storage: announce release: %w", err)
	}
	return nil
}

// FreeSlots returns the number of entries in the free-slot set (slots of
// live and not yet reaped dead workers).
func (s *Store) FreeSlots(ctx context.Context) (int64, error) {
	n, err := s.c.ZCard(ctx, s.k.Free()).Result()
	if err != nil {
		return 0, fmt.Errorf("storage: free slots: %w", err)
	}
	return n, nil
}

// LiveSlots returns the slots of every worker whose heartbeat has not
// expired (Redis TIME): what the namespace could give one run if nothing
// else ran. Two round trips; O(workers).
func (s *Store) LiveSlots(ctx context.Context) (int, error) {
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("storage: live slots: %w", err)
	}
	ws, err := s.c.ZRangeByScore(ctx, s.k.Workers(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil || len(ws) == 0 {
		if err != nil {
			err = fmt.Errorf("storage: live slots: %w", err)
		}
		return 0, err
	}
	cmds := make([]*redis.StringCmd, len(ws))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, w := range ws {
			cmds[i] = p.HGet(ctx, s.k.Worker(w), "slots")
		}
		return nil
	}); err != nil && err != redis.Nil {
		return 0, fmt.Errorf("storage: live slots: %w", err)
	}
	n := 0
	for _, c := range cmds {
		v, _ := c.Int()
		n += v
	}
	return n, nil
}

// QueueCounts are the namespace-wide queues the leader reports.
type QueueCounts struct {
	Launched int // LAUNCHED runs waiting for slots
	Restore  int // runs waiting for the failover restore decision
}

// Queues reads QueueCounts in one round trip.
func (s *Store) Queues(ctx context.Context) (QueueCounts, error) {
	var launched, restore *redis.IntCmd
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		launched = p.ZCard(ctx, s.k.Launched())
		restore = p.SCard(ctx, s.k.Restore())
		return nil
	}); err != nil {
		return QueueCounts{}, fmt.Errorf("storage: queues: %w", err)
	}
	return QueueCounts{Launched: int(launched.Val()), Restore: int(restore.Val())}, nil
}

// unlinkChunk bounds the keys of one UNLINK of DeleteNamespace: removing a
// key from the keyspace is work on Redis's one thread even when its value
// is freed in the background, and 1,000 keys in one command blocked Redis
// for 9-10 ms; 100 stay under a millisecond.
const unlinkChunk = 100

// DeleteNamespace unlinks every key of the namespace (Keys.Prefix + "*",
// SCAN in batches of 1,000, UNLINK in pipelined chunks of unlinkChunk) and
// returns how many. It stops nothing: stop the namespace's hosts and
// workers first.
func (s *Store) DeleteNamespace(ctx context.Context) (int, error) {
	pattern := globEscape(s.k.Prefix()) + "*"
	n := 0
	var cursor uint64
	for {
		keys, cur, err := s.c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return n, fmt.Errorf("storage: delete namespace: %w", err)
		}
		if len(keys) > 0 {
			if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for lo := 0; lo < len(keys); lo += unlinkChunk {
					p.Unlink(ctx, keys[lo:min(lo+unlinkChunk, len(keys))]...)
				}
				return nil
			}); err != nil {
				return n, fmt.Errorf("storage: delete namespace: %w", err)
			}
			n += len(keys)
		}
		if cursor = cur; cursor == 0 {
			return n, nil
		}
	}
}

// globEscape escapes the glob metacharacters of a SCAN MATCH pattern.
func globEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Hosts is the presence set of multi-namespace hosts (HostsKey), shared by
// every namespace on a Redis.
type Hosts struct{ c redis.UniversalClient }

// NewHosts returns the presence set on c.
func NewHosts(c redis.UniversalClient) Hosts { return Hosts{c: c} }

// Beat marks identity present until Redis TIME + ttl, drops expired hosts
// and returns how many are present (at least 1), in one round trip after
// a TIME read.
func (h Hosts) Beat(ctx context.Context, identity string, ttl time.Duration) (int, error) {
	now := time.Now()
	if tm, err := h.c.Time(ctx).Result(); err == nil {
		now = tm // one clock for every host's presence expiry
	}
	var card *redis.IntCmd
	_, err := h.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, HostsKey, redis.Z{Score: float64(now.Add(ttl).UnixMilli()), Member: identity})
		p.ZRemRangeByScore(ctx, HostsKey, "-inf", "("+strconv.FormatInt(now.UnixMilli(), 10))
		card = p.ZCard(ctx, HostsKey)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: host presence: %w", err)
	}
	return max(int(card.Val()), 1), nil
}

// Leave removes identity from the presence set.
func (h Hosts) Leave(ctx context.Context, identity string) error {
	if err := h.c.ZRem(ctx, HostsKey, identity).Err(); err != nil {
		return fmt.Errorf("storage: host presence: %w", err)
	}
	return nil
}
