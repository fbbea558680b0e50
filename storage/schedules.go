package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// Schedule is a cron schedule: the leader submits one run to Group per
// tick of Cron (in TZ), exactly once per tick across leader failover.
// Ticks missed while no leader ran are not made up one by one: the latest
// of them is submitted once and the others are counted in Missed (the
// missed-tick rule). Overlap is the group's serial policy's business
// (wait buffers, discard skips, priority replaces).
type Schedule struct {
	Name  string
	Group string
	// Cron is a standard 5-field expression ("*/5 * * * *") or a
	// descriptor (@hourly, @daily, @every 1m30s).
	Cron string
	// TZ is the IANA zone the expression is read in ("" = UTC).
	TZ string
	// The runs it submits (as SubmitRequest; zero = the group's defaults).
	Payload  string
	Priority int
	Slots    int
	Timeout  time.Duration
	Retry    Retry
	Paused   bool
	// Read back (ignored by SetSchedule):
	Next                 time.Time // next tick (zero when paused)
	LastTick             time.Time // the last tick submitted
	LastRun              string    // its run id
	Submitted, Missed    int64
	CreatedAt, UpdatedAt time.Time
}

// Schedule bounds.
const (

	// minScheduleInterval is the shortest @every a schedule may have.
	minScheduleInterval = time.Second
	// maxCronLen and maxTZLen bound a schedule's expression and zone.
	maxCronLen = 256
	maxTZLen   = 64
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule's expression in zone tz ("" = UTC) with
// github.com/robfig/cron/v3 (5 fields or a descriptor; a CRON_TZ= prefix
// is refused: set TZ).
func ParseCron(expr, tz string) (cron.Schedule, error) {
	const op = "schedule"
	if strings.TrimSpace(expr) == "" {
		return nil, invalid(op, "cron expression is empty")
	}
	if len(expr) > maxCronLen || len(tz) > maxTZLen {
		return nil, invalid(op, "cron expression (%d bytes) or tz (%d bytes) too long: at most %d and %d", len(expr), len(tz), maxCronLen, maxTZLen)
	}
	if strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=") {
		return nil, invalid(op, "cron %q: set the zone with tz, not in the expression", expr)
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, invalid(op, "tz %q: %v", tz, err)
		}
		loc = l
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		// robfig rounds an interval down to whole seconds, silently: refuse
		// what it would change.
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		switch {
		case err != nil:
			return nil, invalid(op, "cron %q: %v", expr, err)
		case d < minScheduleInterval:
			return nil, invalid(op, "cron %q: interval below %v", expr, minScheduleInterval)
		case d%time.Second != 0:
			return nil, invalid(op, "cron %q: the interval must be whole seconds", expr)
		}
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, invalid(op, "cron %q: %v", expr, err)
	}
	switch x := s.(type) {
	case cron.ConstantDelaySchedule:
		if x.Delay < minScheduleInterval {
			return nil, invalid(op, "cron %q: interval below %v", expr, minScheduleInterval)
		}
		return x, nil
	case *cron.SpecSchedule:
		x.Location = loc
		return x, nil
	}
	return s, nil
}

// nextTick is the first tick of s after t (ms precision; an @every
// schedule ticks on whole multiples of its interval since the epoch, so
// every leader computes the same ticks).
func nextTick(s cron.Schedule, t time.Time) time.Time {
	if c, ok := s.(cron.ConstantDelaySchedule); ok {
		d := c.Delay.Milliseconds()
		ms := t.UnixMilli()
		return time.UnixMilli((ms/d + 1) * d)
	}
	return s.Next(t)
}

// scheduleTicks applies the missed-tick rule at now to a schedule whose
// pending tick is due: the tick to submit (the latest at or before now),
// how many earlier ticks it skips, and the next tick after now. It walks
// at most maxWalk ticks; a longer gap counts the rest by the interval.
func scheduleTicks(s cron.Schedule, due, now time.Time) (fire time.Time, missed int64, next time.Time) {
	const maxWalk = 100_000
	fire = due
	for range maxWalk {
		n := nextTick(s, fire)
		if n.After(now) || n.IsZero() {
			return fire, missed, n
		}
		fire, missed = n, missed+1
	}
	// A very long gap of a frequent schedule: jump to now's last tick.
	n := nextTick(s, now)
	if c, ok := s.(cron.ConstantDelaySchedule); ok {
		last := n.Add(-c.Delay)
		missed += int64(last.Sub(fire) / c.Delay)
		return last, missed, n
	}
	return fire, missed, n
}

// scheduleRunID is the run id of a schedule's tick: the same on every
// leader, so a tick cannot be submitted twice.
func scheduleRunID(name string, tick time.Time) string {
	return "s-" + name + "-" + strconv.FormatInt(tick.UnixMilli(), 10)
}

func (sc Schedule) validate() (cron.Schedule, error) {
	const op = "schedule"
	if err := limits.ValidateName("schedule", sc.Name); err != nil {
		return nil, err
	}
	if len(sc.Name) > limits.MaxScheduleName {
		return nil, invalid(op, "schedule name is %d bytes, at most %d", len(sc.Name), limits.MaxScheduleName)
	}
	if err := limits.ValidateName("group", sc.Group); err != nil {
		return nil, err
	}
	cs, err := ParseCron(sc.Cron, sc.TZ)
	if err != nil {
		return nil, err
	}
	switch {
	case sc.Slots < 0:
		return nil, invalid(op, "schedule %s: slots %d is negative", sc.Name, sc.Slots)
	case sc.Slots > limits.MaxRunSlots:
		return nil, invalid(op, "schedule %s: slots %d: at most %d", sc.Name, sc.Slots, limits.MaxRunSlots)
	case len(sc.Payload) > limits.MaxPayload:
		return nil, invalid(op, "schedule %s: payload is %d bytes, at most %d", sc.Name, len(sc.Payload), limits.MaxPayload)
	case sc.Priority < -1<<31 || sc.Priority > 1<<31-1:
		return nil, invalid(op, "schedule %s: priority %d outside the 32-bit range", sc.Name, sc.Priority)
	}
	if sc.Timeout != 0 {
		if err := validTimeout(op, "schedule "+sc.Name, sc.Timeout); err != nil {
			return nil, err
		}
	}
	if err := sc.Retry.validate(op, "schedule "+sc.Name); err != nil {
		return nil, err
	}
	return cs, nil
}

// SetSchedule creates or replaces schedule sc (its counters and
// created_at are kept); its next tick is the first after now.
func (s *Store) SetSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	cs, err := sc.validate()
	if err != nil {
		return Schedule{}, err
	}
	next := nextTick(cs, time.Now())
	slots := max(sc.Slots, 1)
	f := []any{"group", sc.Group, "cron", sc.Cron, "tz", sc.TZ, "payload", sc.Payload,
		"priority", sc.Priority, "slots", slots, "paused", boolField(sc.Paused)}
	if sc.Timeout > 0 {
		f = append(f, "timeout_ms", sc.Timeout.Milliseconds())
	}
	if sc.Retry.MaxAttempts > 0 {
		f = append(f, "max_attempts", sc.Retry.MaxAttempts)
	}
	if b := sc.Retry.backoff(); b != "" {
		f = append(f, "backoff", b)
	}
	if err := s.scheduleOp(ctx, "set", sc.Name, next, f...); err != nil {
		return Schedule{}, err
	}
	return s.GetSchedule(ctx, sc.Name)
}

func boolField(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (s *Store) scheduleOp(ctx context.Context, op, name string, next time.Time, fields ...any) error {
	if err := limits.ValidateName("schedule", name); err != nil {
		return err
	}
	k := s.k
	args := append([]any{op, name, next.UnixMilli(), k.WorkEvents()}, fields...)
	_, err := s.run(ctx, op+" schedule", "schedule", []string{k.Schedules(), k.ScheduleNames(), k.Schedule(name)}, args...)
	return err
}

// PauseSchedule stops a schedule's ticks until ResumeSchedule
// (ErrNotFound for an unknown name).
func (s *Store) PauseSchedule(ctx context.Context, name string) error {
	return s.scheduleOp(ctx, "pause", name, time.Time{})
}

// ResumeSchedule resumes a paused schedule from its next tick after now
// (the ticks while paused are not submitted).
func (s *Store) ResumeSchedule(ctx context.Context, name string) (Schedule, error) {
	sc, err := s.GetSchedule(ctx, name)
	if err != nil {
		return Schedule{}, err
	}
	cs, err := ParseCron(sc.Cron, sc.TZ)
	if err != nil {
		return Schedule{}, err
	}
	if err := s.scheduleOp(ctx, "resume", name, nextTick(cs, time.Now())); err != nil {
		return Schedule{}, err
	}
	return s.GetSchedule(ctx, name)
}

// DeleteSchedule deletes a schedule; the runs it submitted stay.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	return s.scheduleOp(ctx, "delete", name, time.Time{})
}

var scheduleFields = []string{"name", "group", "cron", "tz", "payload", "priority", "slots", "timeout_ms", "max_attempts",
	"backoff", "paused", "last_tick", "last_run", "submitted", "missed", "created_at", "updated_at"}

// GetSchedule reads a schedule (ErrNotFound if absent).
func (s *Store) GetSchedule(ctx context.Context, name string) (Schedule, error) {
	if err := limits.ValidateName("schedule", name); err != nil {
		return Schedule{}, err
	}
	out, err := s.getSchedules(ctx, []string{name})
	if err != nil {
		return Schedule{}, err
	}
	if len(out) == 0 {
		return Schedule{}, fmt.Errorf("storage: schedule %s: %w", name, ErrNotFound)
	}
	return out[0], nil
}

// ListSchedules reads every schedule, by name.
func (s *Store) ListSchedules(ctx context.Context) ([]Schedule, error) {
	names, err := s.c.SMembers(ctx, s.k.ScheduleNames()).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: schedules: %w", err)
	}
	slices.Sort(names)
	return s.getSchedules(ctx, names)
}

func (s *Store) getSchedules(ctx context.Context, names []string) ([]Schedule, error) {
	hs := make([]*redis.SliceCmd, len(names))
	ns := make([]*redis.FloatCmd, len(names))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			hs[i] = p.HMGet(ctx, s.k.Schedule(n), scheduleFields...)
			ns[i] = p.ZScore(ctx, s.k.Schedules(), n)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("storage: schedules: %w", err)
	}
	out := make([]Schedule, 0, len(names))
	for i := range names {
		v := hs[i].Val()
		if len(v) < len(scheduleFields) || v[0] == nil {
			continue
		}
		sc := Schedule{Name: str(v[0]), Group: str(v[1]), Cron: str(v[2]), TZ: str(v[3]), Payload: str(v[4]),
			Priority: int(toInt64(v[5])), Slots: int(toInt64(v[6])), Timeout: time.Duration(toInt64(v[7])) * time.Millisecond,
			Paused: str(v[10]) == "1", LastTick: msTime(toInt64(v[11])), LastRun: str(v[12]),
			Submitted: toInt64(v[13]), Missed: toInt64(v[14]), CreatedAt: msTime(toInt64(v[15])), UpdatedAt: msTime(toInt64(v[16]))}
		_, sc.Retry = groupRunDefaults(nil, v[8], v[9])
		if ns[i].Err() == nil {
			sc.Next = msTime(int64(ns[i].Val()))
		}
		out = append(out, sc)
	}
	return out, nil
}

// FireResult is one schedule's outcome of FireSchedules.
type FireResult struct {
	Name    string
	Outcome string // submitted, exists, stale, paused, gone
	Tick    time.Time
	Missed  int64
	Err     error
}

// FireSchedules fires the due tick of each named schedule at now (Redis
// time): the missed-tick rule picks the tick (scheduleTicks), a fenced
// fire_schedule script per schedule submits its run and moves the
// schedule to its next tick, all in one pipelined round trip after one
// read of the specs.
func (s *Store) FireSchedules(ctx context.Context, f Fence, names []string, now time.Time) []FireResult {
	out := make([]FireResult, len(names))
	scs, err := s.getSchedules(ctx, names)
	if err != nil {
		for i := range out {
			out[i] = FireResult{Name: names[i], Err: err}
		}
		return out
	}
	byName := map[string]Schedule{}
	for _, sc := range scs {
		byName[sc.Name] = sc
	}
	k := s.k
	calls := make([]scriptCall, 0, len(names))
	pos := make([]int, 0, len(names))
	defBackoff := Retry{Base: limits.DefaultRetryBase, Cap: limits.DefaultRetryCap}.backoff()
	for i, n := range names {
		out[i].Name = n
		sc, ok := byName[n]
		if !ok {
			// its hash is gone: the script drops it from the zset
			sc = Schedule{Name: n, Group: "-", Cron: "@every 1h", Next: now}
		} else if sc.Next.IsZero() {
			out[i].Outcome = "gone"
			continue
		} else if sc.Next.After(now) {
			out[i].Outcome = "stale" // fired meanwhile: its next tick is not due
			continue
		}
		cs, err := ParseCron(sc.Cron, sc.TZ)
		if err != nil {
			out[i].Err = err
			continue
		}
		fire, missed, next := scheduleTicks(cs, sc.Next, now)
		if next.IsZero() {
			next = time.UnixMilli(1<<53 - 1) // no tick ever again: park it far ahead
		}
		id := scheduleRunID(n, fire)
		g := sc.Group
		out[i].Tick, out[i].Missed = fire, missed
		calls = append(calls, scriptCall{
			keys: []string{k.Fence(), k.Lock(), k.Schedules(), k.Schedule(n),
				k.Seq(), k.Groups(), k.Group(g), k.Waiting(g), k.Dirty(), k.Run(id), k.Runs(), k.GroupGen(), k.WaitInfo(g), k.Delayed(g), k.Timers()},
			args: append(f.args(), n, sc.Next.UnixMilli(), fire.UnixMilli(), missed, next.UnixMilli(), id, newID("op-"),
				k.WorkEvents(), k.RunEvents(), defBackoff)})
		pos = append(pos, i)
	}
	s.pipeReplies(ctx, "fire schedule", "fire_schedule", calls, pos, 2, func(i int, err error) { out[i].Err = err },
		func(i int, a []any) { out[i].Outcome = str(a[1]) })
	return out
}
