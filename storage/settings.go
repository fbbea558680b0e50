package storage

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// settingsRecheck is how long a Store trusts the namespace settings it
// read (a leader's new --max-run-slots reaches every client within it).
const settingsRecheck = 10 * time.Second

// settingsCache is a Store's last read of keyspace.Keys.Settings().
type settingsCache struct {
	mu          sync.Mutex
	at          time.Time
	maxRunSlots int // 0 = none beyond MaxRunSlots
}

// SetMaxRunSlots records the namespace's bound on a run's slots (1 ..
// MaxRunSlots; 0 removes it), fenced: the leader writes what its hosts were
// started with (serve --max-run-slots). Submit refuses a run that asks
// more (ErrInvalid), within SettingsRecheck of the change.
func (s *Store) SetMaxRunSlots(ctx context.Context, f Fence, n int) error {
	const op = "set max run slots"
	if n < 0 || n > limits.MaxRunSlots {
		return invalid(op, "max run slots %d: want 0 (none) or 1..%d", n, limits.MaxRunSlots)
	}
	v := ""
	if n > 0 {
		v = strconv.Itoa(n)
	}
	if _, err := s.run(ctx, op, "settings", []string{s.k.Fence(), s.k.Lock(), s.k.Settings()}, append(f.args(), "max_run_slots", v)...); err != nil {
		return err
	}
	s.set.mu.Lock()
	s.set.at, s.set.maxRunSlots = time.Now(), n
	s.set.mu.Unlock()
	return nil
}

// namespaceMaxRunSlots returns the namespace's bound on a run's slots (0:
// none beyond MaxRunSlots), read at most every SettingsRecheck.
func (s *Store) namespaceMaxRunSlots(ctx context.Context) (int, error) {
	s.set.mu.Lock()
	defer s.set.mu.Unlock()
	if !s.set.at.IsZero() && time.Since(s.set.at) < settingsRecheck {
		return s.set.maxRunSlots, nil
	}
	v, err := s.c.HGet(ctx, s.k.Settings(), "max_run_slots").Int()
	if err != nil && err != redis.Nil {
		return 0, fmt.Errorf("storage: namespace settings: %w", err)
	}
	s.set.at, s.set.maxRunSlots = time.Now(), v
	return v, nil
}

// checkRunSlots refuses a run asking more slots than the namespace's
// bound. A 1-slot run never reads it (every bound is at least 1).
func (s *Store) checkRunSlots(ctx context.Context, r SubmitRequest) error {
	if r.Slots <= 1 {
		return nil
	}
	m, err := s.namespaceMaxRunSlots(ctx)
	if err != nil {
		return err
	}
	if m > 0 && r.Slots > m {
		return invalid("submit", "run %s: slots %d: namespace %s takes at most %d (the leader's serve --max-run-slots)", r.ID, r.Slots, s.ns, m)
	}
	return nil
}
