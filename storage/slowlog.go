package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	Calls int64
	Usec  int64
}

// ServerStats is what Redis says of the time it spent: INFO commandstats
// by command (lower case, subcommands as "client|setinfo"; the commands a
// script calls are counted too, and in the script's own time) and its CPU
// (used_cpu_user + used_cpu_sys, seconds). For measurements: wasmsched
// bench reads it at each end of its window.
type ServerStats struct {
	Commands   map[string]CommandStat
	CPUSeconds float64
}

// ServerStats reads INFO commandstats and cpu.
func (s *Store) ServerStats(ctx context.Context) (ServerStats, error) {
	info, err := s.c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return ServerStats{}, fmt.Errorf("storage: INFO commandstats: %w", err)
	}
	out := ServerStats{Commands: map[string]CommandStat{}}
	for _, l := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(l, ":")
		switch {
		case !ok:
		case strings.HasPrefix(name, "cmdstat_"):
			var c CommandStat
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					c.Calls = n
				case "usec":
					c.Usec = n
				}
			}
			out.Commands[strings.TrimPrefix(name, "cmdstat_")] = c
		case name == "used_cpu_sys" || name == "used_cpu_user":
			f, _ := strconv.ParseFloat(rest, 64)
			out.CPUSeconds += f
		}
	}
	return out, nil
}

// ScriptSample is what a SampleScripts window logged of one script: its
// top-level calls and their time (with the SLOWLOG's own bookkeeping: an
// entry per command the script calls, made while it runs).
type ScriptSample struct {
	Calls int64
	Took  time.Duration
}

// sampleLogLen is the SLOWLOG length while SampleScripts logs: what one
// window logs must fit (the commands scripts call are logged too).
const sampleLogLen = 1 << 16

// SampleScripts starts logging every command (CONFIG SET
// slowlog-log-slower-than 0, a longer slowlog-max-len, SLOWLOG RESET) and
// returns the function that ends the window: it restores both settings and
// returns each script's calls and time in the window by name ("" for
// scripts that are not the engine's: a lock's, a client's). It changes
// server-wide settings and clears the server's slow log: for measurements
// (wasmsched bench --script-times). Call stop even when ctx ends.
func (s *Store) SampleScripts(ctx context.Context) (stop func(context.Context) (map[string]ScriptSample, error), err error) {
	prev := map[string]string{}
	for _, k := range []string{"slowlog-log-slower-than", "slowlog-max-len"} {
		v, err := s.c.ConfigGet(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("storage: sample scripts: %w", err)
		}
		prev[k] = v[k]
	}
	// restore puts the settings back, the threshold first (the read that
	// follows is not logged) and the length after the read (a shorter
	// length trims the log at once).
	restore := func(ctx context.Context, keys ...string) error {
		for _, k := range keys {
			if err := s.c.ConfigSet(context.WithoutCancel(ctx), k, prev[k]).Err(); err != nil {
				return fmt.Errorf("storage: sample scripts: restoring %s: %w", k, err)
			}
		}
		return nil
	}
	const threshold, length = "slowlog-log-slower-than", "slowlog-max-len"
	err = s.c.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(sampleLogLen)).Err()
	if err == nil {
		err = s.c.Do(ctx, "slowlog", "reset").Err()
	}
	if err == nil {
		err = s.c.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err()
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("storage: sample scripts: %w", err), restore(ctx, threshold, length))
	}
	return func(ctx context.Context) (map[string]ScriptSample, error) {
		if err := restore(ctx, threshold); err != nil {
			return nil, errors.Join(err, restore(ctx, length))
		}
		logs, err := s.c.SlowLogGet(context.WithoutCancel(ctx), sampleLogLen).Result()
		if rerr := restore(ctx, length); err == nil && rerr != nil {
			return nil, rerr
		}
		if err != nil {
			return nil, fmt.Errorf("storage: sample scripts: SLOWLOG GET: %w", err)
		}
		out := map[string]ScriptSample{}
		for _, l := range logs {
			// A script's own calls are logged with the client "?:0".
			if len(l.Args) > 1 && strings.EqualFold(l.Args[0], "evalsha") && l.ClientAddr != "?:0" {
				name := ScriptName(l.Args[1])
				x := out[name]
				x.Calls++
				x.Took += l.Duration
				out[name] = x
			}
		}
		return out, nil
	}, nil
}
