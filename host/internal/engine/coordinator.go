package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/storage"
)

// Coordinator is the serial coordinator leader task. Each pass reads the
// dirty groups (storage.Store.DirtyGroups, never a scan of all groups),
// splits them into batches of 16-64 (pipeChunks) and decides the batches
// EngineConfig.Coordinators at a time (one by default, and one while a
// launched run waits for slots): one pipeline of
// snapshot scripts -> each group's policy (wasm, validated) -> one pipeline
// of fenced, version-checked apply scripts, with per-group outcomes. See Run.
type Coordinator struct {
	rt *Engine

	mu      sync.Mutex
	backoff map[string]backoffState // group -> when it may be decided again
	slow    map[string]bool         // groups whose last decision took longer than slowDecision
	alone   map[string]bool         // groups being decided alone right now (decideAlone)

	aloneWG     sync.WaitGroup
	aloneFenced atomic.Bool // a lone decision was fenced: the next Pass returns ErrFenced
	// more: the last pass left groups dirty that no wake will announce (a
	// full read of dirty, a stale apply, a decision kept dirty: Again):
	// Run passes again at once instead of waiting for a wake
	more atomic.Bool

	// wake ends an idle wait early: a group got work (Keys.WorkEvents,
	// from submit and report, through the host's Bus).
	wake chan struct{}

	// How the next pass finds its groups. fast: every work message since
	// the last pass handed back a snapshot or a reference (a report's),
	// at policy generation hintGen: if this host's policies are at it,
	// the pass decides the offered groups without reading dirty and the
	// generation (one round trip less a handoff). full: some message
	// named a group without its snapshot, or a reference could not be
	// matched: the pass reads dirty. A timeout, a lone decision's end, a
	// stale apply or a read older than fullReadEvery read dirty too.
	fast, full atomic.Bool
	hintGen    atomic.Int64
	lastRead   atomic.Int64 // unix nano of the last read of dirty

	lastPass atomic.Int64 // unix nano

	// beforeApply, if set, runs right before each Apply (test hook).
	beforeApply func(group string)
	// noPlace leaves every launch to the slot manager (tests of the slot
	// manager and the restore task, which start from LAUNCHED runs).
	noPlace bool

	// offered holds the snapshots reports handed back on work-events
	// (storage.ParseWorkEvent), by group, while this host leads: a pass
	// decides such a group from it instead of reading a snapshot (the
	// apply's version check refuses it if the group moved on since).
	leading atomic.Bool
	offered map[string]storage.Snapshot // under mu

	// views holds, by group, the view this host's last apply left (the
	// snapshot it decided less the runs the decision took, at the version
	// the apply returned) while it leads, for a report's hand-back by
	// reference (storage.WorkRef); refs holds a reference that came before
	// its apply's view was kept (the worker's report can beat the apply's
	// reply). Both under mu, both bounded by maxOffered.
	views map[string]keptView
	refs  map[string]storage.WorkRef
}

type backoffState struct {
	until time.Time
	delay time.Duration
}

// LastPass is when the last pass ended (zero before the first).
func (c *Coordinator) LastPass() time.Time { return unixNano(c.lastPass.Load()) }

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Run is the coordinator's LeaderTask: passes until ctx ends, passing
// again at once after a pass that left groups dirty no wake will announce
// (a full read of dirty, a stale apply, Again), after another pass that
// did work at the next wake (or tail poll); otherwise it waits for a
// wake-up (work-events: a submit, a finished run, a stop request, group
// settings; a policy activation), for the first backed-off group to be
// due, or a PollInterval at most (the safety net). It returns
// storage.ErrFenced (demotion) when an apply is fenced; other errors are
// logged, counted and retried.
func (c *Coordinator) Run(ctx context.Context, lease *leader.Lease) error {
	c.rt.log.Info("serial coordinator started", "epoch", lease.Epoch(), "coordinators", c.rt.cfg.Coordinators)
	defer c.rt.log.Info("serial coordinator stopped", "epoch", lease.Epoch())
	defer c.aloneWG.Wait() // lone decisions end with ctx (their calls are bounded by PolicyTimeout)
	c.aloneFenced.Store(false)
	c.full.Store(true) // a new term starts from a read of dirty
	c.leading.Store(true)
	defer func() {
		c.leading.Store(false)
		c.mu.Lock()
		c.offered, c.views, c.refs = nil, nil, nil
		c.mu.Unlock()
	}()
	quiet := tailPolls // empty passes since the last pass that did work
	for ctx.Err() == nil {
		worked, err := c.Pass(ctx, lease)
		if errors.Is(err, storage.ErrFenced) {
			c.rt.m.fenced.WithLabelValues(c.rt.m.ns, "coordinator").Inc()
			return err
		}
		if err != nil && ctx.Err() == nil {
			c.rt.log.Warn("coordinator pass failed", "err", err)
		}
		if worked {
			quiet = 0
			if c.more.Swap(false) {
				continue
			}
			// Every group the pass did not leave dirty itself gets work
			// with a wake (a pending one ends the wait at once), so look
			// again when woken, not right away: a read of dirty right
			// after the pass would find nothing (one wait group: a wasted
			// round trip per handoff). The tail polls below stay the net.
		}
		wait := c.idleWait(time.Now())
		if quiet < tailPolls {
			// Right after work, look again a few times, sooner than the
			// safety net: a wake-up lost in a burst (a full listener
			// buffer drops events) costs milliseconds, not a PollInterval.
			wait = min(wait, tailPoll<<quiet)
		}
		quiet++
		waitWake(ctx, c.wake, wait)
	}
	return nil
}

// After a pass that did work the coordinator looks again at tailPoll,
// 2·tailPoll, ... (tailPolls times, ~2.5 s in all) before it waits a
// PollInterval.
const (
	tailPoll  = 10 * time.Millisecond
	tailPolls = 8
)

// Pass runs one coordinator pass and reports whether it did work (an apply
// or a settle that changed something). It returns storage.ErrFenced when an
// apply was fenced.
func (c *Coordinator) Pass(ctx context.Context, lease *leader.Lease) (bool, error) {
	defer func() {
		now := time.Now()
		c.lastPass.Store(now.UnixNano())
		c.rt.m.pass("coordinator", now)
	}()
	if !lease.Valid() {
		return false, nil
	}
	if c.aloneFenced.Swap(false) {
		return false, fmt.Errorf("host: coordinator: a decision of a group decided alone: %w", storage.ErrFenced)
	}
	groups, gen, handed := c.offeredPass(time.Now())
	if handed {
		c.rt.count("passes.handed_back")
	} else {
		var err error
		c.lastRead.Store(time.Now().UnixNano())
		groups, gen, err = c.rt.st.DirtyAndGeneration(ctx, c.rt.cfg.BatchSize) // one round trip
		if err != nil {
			return false, err
		}
	}
	if len(groups) >= c.rt.cfg.BatchSize {
		c.more.Store(true) // a full read: more may be dirty
	}
	changed, err := c.rt.set.refreshTo(ctx, gen)
	if err != nil {
		return false, err
	}
	if changed { // a new policy version may fix a broken group
		c.mu.Lock()
		c.backoff = nil
		c.mu.Unlock()
	}
	now := time.Now()
	c.mu.Lock()
	todo := groups[:0]
	var alone []string
	for _, g := range groups {
		b, failed := c.backoff[g]
		switch {
		case failed && now.Before(b.until), c.alone[g]:
		case failed || c.slow[g]:
			// Its policy failed or was slow last time: decide it on its
			// own, off this pass, so it cannot hold up the other groups of
			// a batch (each batch applies after all its decisions).
			if c.alone == nil {
				c.alone = map[string]bool{}
			}
			c.alone[g] = true
			alone = append(alone, g)
		default:
			todo = append(todo, g)
		}
	}
	c.mu.Unlock()
	for _, g := range alone {
		c.decideAlone(ctx, lease, g)
	}
	if len(todo) == 0 {
		return false, nil
	}
	var worked atomic.Bool
	n := c.rt.cfg.Coordinators
	if c.rt.slots.waiting.Load() {
		// A launched run waits for slots: launches queue behind it, and
		// deciding faster only lengthens the queue (each queued run costs
		// a second script). One batch at a time until it is placed.
		n = 1
	}
	err = forEach(ctx, n, pipeChunks(todo, n), func(ctx context.Context, gs []string) error {
		did, err := c.decideBatch(ctx, lease, gs)
		if did {
			worked.Store(true)
		}
		return err
	})
	return worked.Load(), err
}

// idleWait is how long an idle coordinator waits for a wake-up: a
// PollInterval, or less when a backed-off group is due sooner (no event
// comes for it).
func (c *Coordinator) idleWait(now time.Time) time.Duration {
	d := c.rt.cfg.PollInterval
	c.mu.Lock()
	defer c.mu.Unlock()
	for g, b := range c.backoff {
		switch left := b.until.Sub(now); {
		case left > 0:
			d = min(d, left)
		case left < -c.rt.cfg.MaxBackoff:
			delete(c.backoff, g) // long past: its group is no longer dirty, or was decided since
		}
	}
	return d
}

// slowDecision is how long a group's decision may take and the group still
// be decided in a batch with others; a slower one is decided alone next
// time (decideAlone), until one of its decisions is fast again.
func (c *Coordinator) slowDecision() time.Duration {
	return c.rt.wasm.Config().CallTimeout / 10
}

// decideAlone decides group in a batch of its own, in the background; Run
// waits for these before it returns. A fenced apply makes the next Pass
// return storage.ErrFenced.
func (c *Coordinator) decideAlone(ctx context.Context, lease *leader.Lease, group string) {
	c.aloneWG.Add(1)
	go func() {
		defer c.aloneWG.Done()
		defer func() {
			c.mu.Lock()
			delete(c.alone, group)
			c.mu.Unlock()
			c.readDirty()
			wakeUp(c.wake) // the group may still be dirty: look again
		}()
		if _, err := c.decideBatch(ctx, lease, []string{group}); errors.Is(err, storage.ErrFenced) {
			c.aloneFenced.Store(true)
		}
	}()
}

// markSpeed records whether group's last decision was slow.
func (c *Coordinator) markSpeed(group string, took time.Duration) {
	slow := took > c.slowDecision()
	c.mu.Lock()
	defer c.mu.Unlock()
	if slow {
		if c.slow == nil {
			c.slow = map[string]bool{}
		}
		c.slow[group] = true
	} else {
		delete(c.slow, group)
	}
}

// waitWake waits for d, a wake-up on wake, or the end of ctx. The poll
// stays as the safety net: a wake-up is only a hint (a lost pub/sub
// message costs one poll interval).
func waitWake(ctx context.Context, wake <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-t.C:
	}
}

// wakeUp makes an idle Run pass at once (never blocks).
func wakeUp(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// maxPipe bounds the groups of one pipelined snapshot / apply batch.
const maxPipe = 64

// pipeChunks splits the groups of a pass into batches of about
// len/coordinators groups, at least min(len, 16) and at most maxPipe, so a
// big pass is few pipelines (Redis pays per read/write, not per command)
// that still run `coordinators` at a time.
func pipeChunks(groups []string, coordinators int) [][]string {
	size := (len(groups) + max(coordinators, 1) - 1) / max(coordinators, 1)
	size = min(max(size, 16), maxPipe)
	var out [][]string
	for lo := 0; lo < len(groups); lo += size {
		out = append(out, groups[lo:min(lo+size, len(groups))])
	}
	return out
}

// forEach runs fn for every item, n at a time. The first storage.ErrFenced
// cancels the rest and is returned; other errors are the callee's to log.
func forEach[T any](ctx context.Context, n int, items []T, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg     sync.WaitGroup
		once   sync.Once
		fenced error
		sem    = make(chan struct{}, max(n, 1))
	)
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, it); errors.Is(err, storage.ErrFenced) {
				once.Do(func() { fenced = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return fenced
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
