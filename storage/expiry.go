package storage

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// retention reads a retention_ms value: absent or -1 = the default (-1).
func retention(v any) time.Duration {
	if v == nil {
		return RetentionDefault
	}
	ms := toInt64(v)
	if ms < 0 {
		return RetentionDefault
	}
	return time.Duration(ms) * time.Millisecond
}

// ExpireChunk is the number of finished runs one expire script removes.
const ExpireChunk = 256

// expire removes up to chunk (<= 0: ExpireChunk) of group's finished runs
// older than its retention (its own, else def; 0 = forever), with their
// index entries, in one fenced script, and reports how many and whether
// more may be due (then call it again). Errors: ErrFenced, ErrInvalid.
func (s *Store) expire(ctx context.Context, f Fence, group string, def time.Duration, chunk int) (n int, more bool, err error) {
	if err := limits.ValidateName("group", group); err != nil {
		return 0, false, err
	}
	if def < 0 {
		return 0, false, invalid("expire", "default retention %v is negative", def)
	}
	if chunk <= 0 {
		chunk = ExpireChunk
	}
	r := s.expireCalls(ctx, f, []string{group}, def, chunk)[0]
	return r.Removed, r.More, r.Err
}

// chunkReply parses the {done, more (0|1)} reply of a chunked script
// (drain).
func chunkReply(op string, v any) (int, bool, error) {
	a, _ := v.([]any)
	if len(a) < 2 {
		return 0, false, fmt.Errorf("storage: %s: unexpected reply %v", op, v)
	}
	return int(toInt64(a[0])), toInt64(a[1]) == 1, nil
}

// ExpireResult is one group's outcome in an ExpireBatch.
type ExpireResult struct {
	Removed int
	More    bool
	Err     error
}

// ExpireBatch is Expire (one chunk) for many groups: calls of up to
// expireGroupsPerCall groups (fenced once a call, its chunk of
// ExpireChunk runs shared by its groups, expire.lua), all in ONE pipelined
// round trip; results are in order (a group its call's chunk did not
// reach says More).
func (s *Store) ExpireBatch(ctx context.Context, f Fence, groups []string, def time.Duration) []ExpireResult {
	return s.expireCalls(ctx, f, groups, def, ExpireChunk)
}

// expireGroupsPerCall is how many groups one expire call carries at most.
const expireGroupsPerCall = 32

func (s *Store) expireCalls(ctx context.Context, f Fence, groups []string, def time.Duration, chunk int) []ExpireResult {
	out := make([]ExpireResult, len(groups))
	if def < 0 {
		for i := range out {
			out[i].Err = invalid("expire", "default retention %v is negative", def)
		}
		return out
	}
	k := s.k
	head := func() scriptCall {
		return scriptCall{keys: []string{k.Fence(), k.Lock(), k.Runs(), k.Retire()},
			args: append(f.args(), k.RunPrefix(), def.Milliseconds(), chunk)}
	}
	parts := make([]scriptCall, 0, len(groups))
	pos := make([]int, 0, len(groups))
	for i, g := range groups {
		if err := limits.ValidateName("group", g); err != nil {
			out[i].Err = err
			continue
		}
		parts = append(parts, scriptCall{keys: []string{k.Group(g), k.Finished(g)}, args: []any{g}})
		pos = append(pos, i)
	}
	calls, n := packCalls(head, parts, expireGroupsPerCall, nil, 0)
	vals, errs := s.runPipe(ctx, "expire", "expire", calls)
	vals, errs = callResults("expire", n, vals, errs)
	for j, i := range pos {
		if out[i].Err = errs[j]; out[i].Err != nil {
			continue
		}
		a, _ := vals[j].([]any)
		if len(a) < 2 {
			out[i].Err = fmt.Errorf("storage: expire: unexpected reply %v", vals[j])
			continue
		}
		out[i] = ExpireResult{Removed: int(toInt64(a[0])), More: toInt64(a[1]) == 1}
	}
	return out
}

// RetireDue returns up to limit groups whose oldest finished run may be
// due for removal at now (Keys.Retire), and when the next group not among
// them is due (zero if none is).
func (s *Store) RetireDue(ctx context.Context, now time.Time, limit int) (due []string, next time.Time, err error) {
	var dueCmd *redis.StringSliceCmd
	var nextCmd *redis.ZSliceCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		dueCmd = p.ZRangeByScore(ctx, s.k.Retire(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit)})
		nextCmd = p.ZRangeByScoreWithScores(ctx, s.k.Retire(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf", Count: 1})
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("storage: retire: %w", err)
	}
	if z := nextCmd.Val(); len(z) == 1 && !math.IsInf(z[0].Score, 1) {
		next = msTime(int64(z[0].Score))
	}
	return dueCmd.Val(), next, nil
}

// NextRetire returns when the first group of the retire index is due
// (zero if none is, or it is kept forever).
func (s *Store) NextRetire(ctx context.Context) (time.Time, error) {
	z, err := s.c.ZRangeWithScores(ctx, s.k.Retire(), 0, 0).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("storage: retire: %w", err)
	}
	if len(z) == 0 || math.IsInf(z[0].Score, 1) {
		return time.Time{}, nil
	}
	return msTime(int64(z[0].Score)), nil
}

// RetireGroups returns every group of the retire index (the retention
// task's first pass of a term also visits these: a deleted group's
// finished runs are only here).
func (s *Store) RetireGroups(ctx context.Context) ([]string, error) {
	names, err := s.c.ZRange(ctx, s.k.Retire(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: retire: %w", err)
	}
	return names, nil
}
