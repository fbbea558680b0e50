package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// Time series the leader keeps for pictures (the web UI's charts, GET
// .../series): one point per SeriesInterval while the namespace is busy,
// 24 hours of them, for the namespace and for each group that had
// something in the interval (at most SeriesGroups a point).
const (
	SeriesInterval = 10 * time.Second
	SeriesPoints   = 8640 // 24 h of points
	SeriesGroups   = 500
	seriesLifetime = 25 * time.Hour
)

// SeriesPoint is one point of a time series: what happened in the
// SeriesInterval before At (Launches, Finishes) and the state at At
// (Waiting, Active; of the namespace: SlotsUsed of SlotsTotal; of a
// group: the wait, submit to launch, of the runs it launched in the
// interval, WaitP50 and WaitP95).
type SeriesPoint struct {
	At                    time.Time
	Launches, Finishes    int
	Waiting, Active       int
	SlotsUsed, SlotsTotal int
	WaitP50, WaitP95      time.Duration
}

func (p SeriesPoint) encode(group bool) string {
	if group {
		return fmt.Sprintf("%d,%d,%d,%d,%d,%d,%d", p.At.UnixMilli(), p.Launches, p.Finishes, p.Waiting, p.Active,
			p.WaitP50.Milliseconds(), p.WaitP95.Milliseconds())
	}
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d,%d", p.At.UnixMilli(), p.Launches, p.Finishes, p.Waiting, p.Active, p.SlotsUsed, p.SlotsTotal)
}

func parsePoint(s string, group bool) (SeriesPoint, bool) {
	f := strings.Split(s, ",")
	if len(f) != 7 {
		return SeriesPoint{}, false
	}
	var n [7]int64
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return SeriesPoint{}, false
		}
		n[i] = v
	}
	p := SeriesPoint{At: msTime(n[0]), Launches: int(n[1]), Finishes: int(n[2]), Waiting: int(n[3]), Active: int(n[4])}
	if group {
		p.WaitP50, p.WaitP95 = time.Duration(n[5])*time.Millisecond, time.Duration(n[6])*time.Millisecond
	} else {
		p.SlotsUsed, p.SlotsTotal = int(n[5]), int(n[6])
	}
	return p, true
}

// RecordSeries appends ns to the namespace's series and each point of
// groups (at most SeriesGroups) to its group's, in one fenced script.
func (s *Store) RecordSeries(ctx context.Context, f Fence, ns SeriesPoint, groups map[string]SeriesPoint) error {
	if len(groups) > SeriesGroups {
		return invalid("series", "%d groups, at most %d", len(groups), SeriesGroups)
	}
	k := s.k
	keys := []string{k.Fence(), k.Lock(), k.Series()}
	args := append(f.args(), SeriesPoints, seriesLifetime.Milliseconds(), ns.encode(false))
	for g, p := range groups {
		if err := limits.ValidateName("group", g); err != nil {
			return err
		}
		keys = append(keys, k.GroupSeries(g))
		args = append(args, p.encode(true))
	}
	_, err := s.run(ctx, "series", "series", keys, args...)
	return err
}

// Series reads the points of the namespace's series (group "") or of a
// group's at or after since, oldest first (at most SeriesPoints).
func (s *Store) Series(ctx context.Context, group string, since time.Time) ([]SeriesPoint, error) {
	key := s.k.Series()
	if group != "" {
		if err := limits.ValidateName("group", group); err != nil {
			return nil, err
		}
		key = s.k.GroupSeries(group)
	}
	// the points are a SeriesInterval apart at most: read the tail only
	n := int64(SeriesPoints)
	if !since.IsZero() {
		n = min(n, int64(time.Since(since)/SeriesInterval)+2)
	}
	vs, err := s.c.LRange(ctx, key, -n, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: series: %w", err)
	}
	out := make([]SeriesPoint, 0, len(vs))
	for _, v := range vs {
		if p, ok := parsePoint(v, group != ""); ok && !p.At.Before(since) {
			out = append(out, p)
		}
	}
	return out, nil
}

// GroupCounts is what a series point needs of each group: its waiting
// (due and delayed) and active runs and its runs finished after since,
// and the namespace's slots in use and in all, in one pipeline.
func (s *Store) GroupCounts(ctx context.Context, groups []string, since time.Time) (pts map[string]SeriesPoint, slotsUsed, slotsTotal int, err error) {
	type cmds struct{ w, d, a, f *redis.IntCmd }
	cs := make([]cmds, len(groups))
	var total, free *redis.IntCmd
	from := "(" + strconv.FormatInt(since.UnixMilli(), 10)
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, g := range groups {
			cs[i] = cmds{p.ZCard(ctx, s.k.Waiting(g)), p.ZCard(ctx, s.k.Delayed(g)), p.ZCard(ctx, s.k.Active(g)),
				p.ZCount(ctx, s.k.Finished(g), from, "+inf")}
		}
		total, free = p.HLen(ctx, s.k.Slots()), p.ZCard(ctx, s.k.Free())
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("storage: group counts: %w", err)
	}
	pts = make(map[string]SeriesPoint, len(groups))
	for i, g := range groups {
		pts[g] = SeriesPoint{Waiting: int(cs[i].w.Val() + cs[i].d.Val()), Active: int(cs[i].a.Val()), Finishes: int(cs[i].f.Val())}
	}
	return pts, int(total.Val() - free.Val()), int(total.Val()), nil
}
