package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tick is the leader's last liveness mark (hash keyspace.Keys.LeaderTick()).
type Tick struct {
	Holder string
	Epoch  int64
	At     time.Time // Redis TIME of the tick
	Count  int64     // ticks of this term (epoch) so far
}

// Tick records a liveness mark of the leader holding f: holder, epoch, at
// (Redis TIME) and the term's tick count. It is a fenced write: ErrFenced
// (nothing written) unless f is the current fence and the lock still holds
// f.Holder. Read it back with LastTick.
func (s *Store) Tick(ctx context.Context, f Fence) error {
	if f.Holder == "" {
		return invalid("tick", "empty holder stamp")
	}
	_, err := s.run(ctx, "tick", "tick", []string{s.k.Fence(), s.k.Lock(), s.k.LeaderTick()}, f.args()...)
	return err
}

// LastTick reads the last tick; the zero Tick if there was none.
func (s *Store) LastTick(ctx context.Context) (Tick, error) {
	vals, err := s.c.HMGet(ctx, s.k.LeaderTick(), "holder", "epoch", "at", "count").Result()
	if err != nil && err != redis.Nil {
		return Tick{}, fmt.Errorf("storage: last tick: %w", err)
	}
	var tk Tick
	tk.Holder, _ = vals[0].(string)
	tk.Epoch = toInt64(vals[1])
	tk.At = msTime(toInt64(vals[2]))
	tk.Count = toInt64(vals[3])
	return tk, nil
}
