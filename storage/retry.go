package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// maxRetryBatch bounds the runs one retry script puts back.
const maxRetryBatch = 256

// RetryRun puts a FAILED or STOPPED run back to WAITING as a new attempt of
// the same run (retry.lua): attempt + 1, its earlier attempts kept in its
// attempt log, decided by its group's policy like any waiting run. Any
// other state is ErrBadState (a run not final, or one that succeeded or
// was discarded); who is named in its reason.
func (s *Store) RetryRun(ctx context.Context, id, who string) (Run, error) {
	const op = "retry"
	g, err := s.runGroup(ctx, op, id)
	if err != nil {
		return Run{}, err
	}
	res, err := s.retry(ctx, g, []string{id}, who)
	if err != nil {
		return Run{}, err
	}
	switch st := res[0]; {
	case st == "not_found":
		return Run{}, fmt.Errorf("storage: %s: run %s: %w", op, id, ErrNotFound)
	case st != "":
		return Run{}, fmt.Errorf("storage: %s: run %s is %s: only a FAILED or STOPPED run can be retried: %w", op, id,
			strings.TrimPrefix(st, "state "), ErrBadState)
	}
	return s.GetRun(ctx, id)
}

// RetryFilter selects a group's finished runs for RetryGroup.
type RetryFilter struct {
	// State is StateFailed (the default) or StateStopped.
	State State
	// Labels: only runs carrying all of them.
	Labels []abi.Label
	// Since: only runs that finished at or after it (zero: any).
	Since time.Time
	// Limit: at most this many (0: all).
	Limit int
}

// RetryGroup retries the group's finished runs f selects (as RetryRun
// does each), oldest finish first, maxRetryBatch a script call, and returns
// how many it put back.
func (s *Store) RetryGroup(ctx context.Context, group string, f RetryFilter, who string) (int, error) {
	const op = "retry group"
	if err := limits.ValidateName("group", group); err != nil {
		return 0, err
	}
	if f.State == "" {
		f.State = StateFailed
	}
	if f.State != StateFailed && f.State != StateStopped {
		return 0, invalid(op, "group %s: state %s: only FAILED or STOPPED runs can be retried", group, f.State)
	}
	if f.Limit < 0 {
		return 0, invalid(op, "group %s: negative limit %d", group, f.Limit)
	}
	ls, err := limits.NormalizeLabels("labels", f.Labels, abi.MaxLabels)
	if err != nil {
		return 0, invalid(op, "group %s: %v", group, err)
	}
	min := "-inf"
	if !f.Since.IsZero() {
		min = strconv.FormatInt(f.Since.UnixMilli(), 10)
	}
	if n, err := s.c.Exists(ctx, s.k.Group(group)).Result(); err != nil {
		return 0, fmt.Errorf("storage: %s: %w", op, err)
	} else if n == 0 {
		return 0, fmt.Errorf("storage: %s: group %s: %w", op, group, ErrNotFound)
	}
	done, skipped := 0, int64(0)
	for f.Limit == 0 || done < f.Limit {
		ids, err := s.c.ZRangeByScore(ctx, s.k.Finished(group), &redis.ZRangeBy{Min: min, Max: "+inf", Offset: skipped, Count: maxRetryBatch}).Result()
		if err != nil {
			return done, fmt.Errorf("storage: %s: %w", op, err)
		}
		if len(ids) == 0 {
			return done, nil
		}
		pick, err := s.retryPick(ctx, ids, f.State, ls)
		if err != nil {
			return done, err
		}
		if f.Limit > 0 && len(pick) > f.Limit-done {
			pick = pick[:f.Limit-done]
		}
		skipped += int64(len(ids) - len(pick))
		if len(pick) == 0 {
			continue
		}
		res, err := s.retry(ctx, group, pick, who)
		if err != nil {
			return done, err
		}
		for _, r := range res {
			if r == "" {
				done++
			} else {
				skipped++ // (changed since it was read: it stays in finished)
			}
		}
	}
	return done, nil
}

// retryPick is ids narrowed to the runs in state with every label of ls.
func (s *Store) retryPick(ctx context.Context, ids []string, state State, ls []abi.Label) ([]string, error) {
	cmds := make([]*redis.SliceCmd, len(ids))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.k.Run(id), "state", "labels")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("storage: retry group: %w", err)
	}
	var out []string
	for i, c := range cmds {
		v := c.Val()
		if len(v) < 2 || State(str(v[0])) != state {
			continue
		}
		have := decodeLabels(str(v[1]))
		ok := true
		for _, l := range ls {
			ok = ok && abi.LabelValue(have, l.Key) == l.Value
		}
		if ok {
			out = append(out, ids[i])
		}
	}
	return out, nil
}

// retry runs retry.lua on ids of group (at most maxRetryBatch): "" for a
// run put back, else why not.
func (s *Store) retry(ctx context.Context, group string, ids []string, who string) ([]string, error) {
	if who == "" {
		who = "an operator"
	}
	k := s.k
	args := []any{group, k.RunPrefix(), who, k.WorkEvents(), k.RunEvents()}
	for _, id := range ids {
		args = append(args, id)
	}
	v, err := s.run(ctx, "retry", "retry", []string{k.Timers(), k.Delayed(group), k.Finished(group), k.Group(group)}, args...)
	if err != nil {
		return nil, err
	}
	raw, _ := v.([]any)
	out := make([]string, len(ids))
	for i := range out {
		if i < len(raw) {
			out[i] = str(raw[i])
		} else {
			out[i] = "not_found"
		}
	}
	return out, nil
}
