package storage

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SlowCommand is one entry of the Redis SLOWLOG.
type SlowCommand struct {
	Took time.Duration
	Args string // the command, its arguments cut at 6
}

// WatchSlowLog makes the server log every command slower than threshold
// (CONFIG SET slowlog-log-slower-than, SLOWLOG RESET) and returns a function
// that reads the slowest logged commands and restores the threshold. For
// measurements (wasmsched bench --slowlog): it changes server-wide settings
// and clears the server's slow log.
func (s *Store) WatchSlowLog(ctx context.Context, threshold time.Duration) (read func(context.Context) ([]SlowCommand, error), err error) {
	prev, err := s.c.ConfigGet(ctx, "slowlog-log-slower-than").Result()
	if err != nil {
		return nil, fmt.Errorf("storage: slowlog: %w", err)
	}
	if err := s.c.ConfigSet(ctx, "slowlog-log-slower-than", fmt.Sprint(threshold.Microseconds())).Err(); err != nil {
		return nil, fmt.Errorf("storage: slowlog: %w", err)
	}
	if err := s.c.Do(ctx, "slowlog", "reset").Err(); err != nil {
		return nil, fmt.Errorf("storage: slowlog: %w", err)
	}
	return func(ctx context.Context) ([]SlowCommand, error) {
		defer s.c.ConfigSet(context.WithoutCancel(ctx), "slowlog-log-slower-than", prev["slowlog-log-slower-than"])
		logs, err := s.c.SlowLogGet(ctx, 128).Result()
		if err != nil {
			return nil, fmt.Errorf("storage: slowlog: %w", err)
		}
		out := make([]SlowCommand, 0, len(logs))
		for _, l := range logs {
			args := append([]string(nil), l.Args...)
			if len(args) > 1 && strings.EqualFold(args[0], "evalsha") {
				for name, sc := range scripts {
					if sc.Hash() == args[1] {
						args[1] = name + ".lua"
					}
				}
			}
			if len(args) > 6 {
				args = append(args[:6:6], "...")
			}
			out = append(out, SlowCommand{Took: l.Duration, Args: strings.Join(args, " ")})
		}
		return out, nil
	}, nil
}
