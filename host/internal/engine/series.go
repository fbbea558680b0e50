package engine

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// seriesAcc accumulates what the coordinator launched between two points
// of the time series: per group, the launches and their waits (submit to
// launch, from the snapshot the decision was made on), and whether
// anything happened at all (a launch, a work event).
type seriesAcc struct {
	mu     sync.Mutex
	groups map[string]*groupAcc
	busy   bool
}

type groupAcc struct {
	launches int
	waits    []time.Duration // at most maxWaits, for the percentiles
}

const maxWaits = 1024

func (a *seriesAcc) launched(group string, waits []time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.groups == nil {
		a.groups = map[string]*groupAcc{}
	}
	g := a.groups[group]
	if g == nil {
		if len(a.groups) >= storage.SeriesGroups*4 {
			return // bounded: a burst over this many groups is sampled
		}
		g = &groupAcc{}
		a.groups[group] = g
	}
	g.launches += len(waits)
	if room := maxWaits - len(g.waits); room > 0 {
		g.waits = append(g.waits, waits[:min(room, len(waits))]...)
	}
	a.busy = true
}

// touched marks the namespace busy (a report, a submit: a work event).
func (a *seriesAcc) touched() {
	a.mu.Lock()
	a.busy = true
	a.mu.Unlock()
}

func (a *seriesAcc) take() (map[string]*groupAcc, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, b := a.groups, a.busy
	a.groups, a.busy = nil, false
	return g, b
}

// percentile of sorted ds (p in [0, 1]).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(int(p*float64(len(ds))), len(ds)-1)]
}

// series is the leader task that keeps the time series the web UI draws
// (storage.RecordSeries): every storage.SeriesInterval, while anything
// happens (a launch, a work event, or a group that still had runs at the
// last point), one point for the namespace and one for each group that
// launched in the interval or had runs (at most storage.SeriesGroups, the
// busiest first): launches, finishes, waiting, active, slots in use, and
// a group's wait p50/p95. An idle namespace costs nothing: no point, no
// read.
func (r *Engine) series(ctx context.Context, lease *leader.Lease) error {
	var last []string // groups with runs at the last point
	prev := time.Now()
	t := time.NewTicker(r.cfg.SeriesInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		acc, busy := r.acc.take()
		if !lease.Valid() || (!busy && len(last) == 0) {
			prev = time.Now()
			continue
		}
		groups := make([]string, 0, len(acc)+len(last))
		for g := range acc {
			groups = append(groups, g)
		}
		for _, g := range last {
			if acc[g] == nil {
				groups = append(groups, g)
			}
		}
		sort.Slice(groups, func(i, j int) bool { return launchesOf(acc, groups[i]) > launchesOf(acc, groups[j]) })
		groups = groups[:min(len(groups), storage.SeriesGroups)]
		now := time.Now()
		pts, used, total, err := r.st.GroupCounts(ctx, groups, prev)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("series: reading the counts failed", "err", err)
			}
			continue
		}
		ns := storage.SeriesPoint{At: now, SlotsUsed: used, SlotsTotal: total}
		last = last[:0]
		for _, g := range groups {
			p := pts[g]
			p.At = now
			if a := acc[g]; a != nil {
				p.Launches = a.launches
				slices.Sort(a.waits)
				p.WaitP50, p.WaitP95 = percentile(a.waits, 0.5), percentile(a.waits, 0.95)
			}
			pts[g] = p
			ns.Launches += p.Launches
			ns.Finishes += p.Finishes
			ns.Waiting += p.Waiting
			ns.Active += p.Active
			if p.Waiting+p.Active > 0 {
				last = append(last, g)
			}
		}
		if err := r.st.RecordSeries(ctx, lease.Fence(), ns, pts); err != nil {
			if errors.Is(err, storage.ErrFenced) {
				r.m.fenced.WithLabelValues(r.m.ns, "series").Inc()
				return err
			}
			if ctx.Err() == nil {
				r.log.Warn("series: recording a point failed", "err", err)
			}
		}
		prev = now
	}
}

func launchesOf(acc map[string]*groupAcc, g string) int {
	if a := acc[g]; a != nil {
		return a.launches
	}
	return 0
}
