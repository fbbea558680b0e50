package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/internal/limits"
)

// dueChunk is the number of due runs one due script moves into a group's
// queue (the timer calls again while more are due).
const dueChunk = 256

// TimerEvent is the work-events message of a script that changed only
// the timers (a delayed submit, a retry parked): the leader's timer task
// looks again; the coordinator has nothing to decide.
const TimerEvent = "#timer"

// TimerState is what the leader's timer task reads in one call
// (Store.Timers), by Redis time.
type TimerState struct {
	Now time.Time
	// Groups have delayed runs that are due (at most the limit).
	Groups []string
	// NextGroup is when the next group's timer not in Groups is due
	// (zero: none; Now when Groups is the limit and more may be due).
	NextGroup time.Time
	// Schedules have a tick due; NextSchedule as NextGroup.
	Schedules    []string
	NextSchedule time.Time
}

// Next is the earliest of NextGroup and NextSchedule (zero: neither).
func (t TimerState) Next() time.Time {
	switch {
	case t.NextGroup.IsZero():
		return t.NextSchedule
	case t.NextSchedule.IsZero() || t.NextGroup.Before(t.NextSchedule):
		return t.NextGroup
	}
	return t.NextSchedule
}

// Timers reads the due group timers and schedule ticks, up to limit of
// each, and when the next ones are due (timers.lua: one script).
func (s *Store) Timers(ctx context.Context, limit int) (TimerState, error) {
	v, err := s.run(ctx, "timers", "timers", []string{s.k.Timers(), s.k.Schedules()}, max(limit, 1))
	if err != nil {
		return TimerState{}, err
	}
	a, _ := v.([]any)
	if len(a) < 5 {
		return TimerState{}, fmt.Errorf("storage: timers: unexpected reply %v", v)
	}
	at := func(x any) time.Time {
		if n := toInt64(x); n >= 0 {
			return msTime(n)
		}
		return time.Time{}
	}
	return TimerState{Now: msTime(toInt64(a[0])), Groups: strs(a[1]), NextGroup: at(a[2]),
		Schedules: strs(a[3]), NextSchedule: at(a[4])}, nil
}

func strs(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		out = append(out, str(x))
	}
	return out
}

// DueResult is one group's outcome of a DueBatch.
type DueResult struct {
	Moved int       // runs moved into the group's queue
	Next  time.Time // when its next delayed run or wake is due (zero: none left)
	Woken bool      // the policy's wake fired: the group is dirty
	// Retried is how many of Moved were on a second or later attempt: an
	// automatic retry whose backoff passed, or a run or group retry.
	Retried int
	Err     error
}

// DueBatch moves the due delayed runs of each group (up to dueChunk per
// group) into its queue, one fenced due script per group, all in one
// pipelined round trip; the moved runs' groups are dirty and announced on
// work-events. Errors are per group (ErrFenced for all when deposed).
func (s *Store) DueBatch(ctx context.Context, f Fence, groups []string) []DueResult {
	out := make([]DueResult, len(groups))
	k := s.k
	calls := make([]scriptCall, 0, len(groups))
	pos := make([]int, 0, len(groups))
	for i, g := range groups {
		if err := limits.ValidateName("group", g); err != nil {
			out[i].Err = err
			continue
		}
		calls = append(calls, scriptCall{
			keys: []string{k.Fence(), k.Lock(), k.Timers(), k.Group(g), k.Delayed(g), k.Waiting(g), k.WaitInfo(g), k.Dirty(), k.Seq(), k.Runs()},
			args: append(f.args(), g, dueChunk, k.RunPrefix(), k.WorkEvents())})
		pos = append(pos, i)
	}
	s.pipeReplies(ctx, "due", "due", calls, pos, 2, func(i int, err error) { out[i].Err = err }, func(i int, a []any) {
		out[i].Moved = int(toInt64(a[0]))
		if n := toInt64(a[1]); n >= 0 {
			out[i].Next = msTime(n)
		}
		out[i].Woken = len(a) > 2 && toInt64(a[2]) == 1
		if len(a) > 3 {
			out[i].Retried = int(toInt64(a[3]))
		}
	})
	return out
}

// pipeReplies sends calls (one per index in pos) in one pipeline of script
// and hands each reply, a list of at least n values, to ok(i, reply), and
// an error or a short reply to fail(i, err).
func (s *Store) pipeReplies(ctx context.Context, op, script string, calls []scriptCall, pos []int, n int,
	fail func(i int, err error), ok func(i int, a []any)) {
	vals, errs := s.runPipe(ctx, op, script, calls)
	for j, i := range pos {
		if errs[j] != nil {
			fail(i, errs[j])
			continue
		}
		a, _ := vals[j].([]any)
		if len(a) < n {
			fail(i, fmt.Errorf("storage: %s: unexpected reply %v", op, vals[j]))
			continue
		}
		ok(i, a)
	}
}
