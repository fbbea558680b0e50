package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/policies"
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

// keptView is the view an apply left (storage.LeaveView): the snapshot
// less what the decision took, at the apply's version, and for a
// truncated window the gap a reference fills.
type keptView struct {
	sn  storage.Snapshot
	gap storage.ViewGap
}

// maxViewRuns bounds the window of a view kept (the runs a report would
// hand back at most, report.lua): views hold at most maxOffered ·
// maxViewRuns runs.
const maxViewRuns = 64

// maxOffered bounds the offered snapshots held (the oldest are not
// special: past the bound new ones are dropped, those groups read a
// snapshot as before).
const maxOffered = 4096

// offer keeps sn, a group's snapshot a report handed back, for the next
// pass (the newest version wins). Only while leading.
// It reports whether the group has an offered snapshot now (false: not
// leading, or no room).
func (c *Coordinator) offer(sn storage.Snapshot) bool {
	if !c.leading.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offerLocked(sn)
}

func (c *Coordinator) offerLocked(sn storage.Snapshot) bool {
	if c.offered == nil {
		c.offered = map[string]storage.Snapshot{}
	}
	cur, ok := c.offered[sn.Group.Name]
	switch {
	case ok && cur.Group.Version >= sn.Group.Version:
	case !ok && len(c.offered) >= maxOffered:
		return false
	default:
		c.offered[sn.Group.Name] = sn
	}
	return true
}

// offerRef turns a report's hand-back by reference into an offered
// snapshot when the view the last apply left is the one it refers to
// (one version before it); a reference that came first waits for that
// view (keepView). Only while leading. It reports whether the group needs
// no read of dirty to be decided: offered, newer than the reference, or
// waiting for its view (keepView asks for a read if it does not come).
func (c *Coordinator) offerRef(ref storage.WorkRef) bool {
	if !c.leading.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.views[ref.Group]
	switch {
	case ok && v.sn.Group.Version == ref.Version-1:
		delete(c.views, ref.Group)
		sn, good := ref.View(v.sn, v.gap)
		if !good {
			return false // the group is read
		}
		c.rt.count("snapshots.by_reference")
		return c.offerLocked(sn)
	case ok && v.sn.Group.Version >= ref.Version:
		// an older report's reference: the view is newer
	default:
		cur, had := c.refs[ref.Group]
		if c.refs == nil || (!had && len(c.refs) >= maxOffered) {
			// references are hints: a full map (of groups not decided
			// since) starts over rather than refusing the new ones
			c.refs = map[string]storage.WorkRef{}
		}
		if !had || cur.Version < ref.Version {
			c.refs[ref.Group] = ref
		}
	}
	return true
}

// handedBack records what one work-events message of the listener
// carried: every group in it handed back (offered or waiting for its
// view, offer and offerRef) at policy generation gen, or not (all is
// false too when the message had no generation).
func (c *Coordinator) handedBack(all bool, gen int64) {
	if all {
		c.hintGen.Store(gen)
		c.fast.Store(true)
		return
	}
	c.full.Store(true)
}

// readDirty asks the next pass to read dirty (a group may be dirty that
// no hand-back announced).
func (c *Coordinator) readDirty() { c.full.Store(true) }

// fullReadEvery bounds how long passes go on the hand-backs alone: a
// group whose wake was lost (a full listener buffer drops messages) is
// found by the next read of dirty.
const fullReadEvery = 50 * time.Millisecond

// offeredPass returns the groups the next pass decides from hand-backs
// alone and their policy generation, or ok = false when the pass reads
// dirty (see Coordinator.fast).
func (c *Coordinator) offeredPass(now time.Time) (groups []string, gen int64, ok bool) {
	full, fast := c.full.Swap(false), c.fast.Swap(false)
	if full || !fast || now.Sub(unixNano(c.lastRead.Load())) > fullReadEvery {
		return nil, 0, false
	}
	gen = c.hintGen.Load()
	if !c.rt.set.at(gen) {
		return nil, 0, false // a policy changed: read the generation (and dirty) again
	}
	c.mu.Lock()
	for g := range c.offered {
		if len(groups) == c.rt.cfg.BatchSize {
			break
		}
		groups = append(groups, g)
	}
	c.mu.Unlock()
	if len(groups) == 0 {
		return nil, 0, false
	}
	sort.Strings(groups)
	return groups, gen, true
}

// taken is the set of runs decision d launches or discards (they leave
// the window).
func taken(d storage.Decision) map[string]bool {
	t := make(map[string]bool, len(d.Actions))
	for _, a := range d.Actions {
		if a.Kind == storage.ActionLaunch || a.Kind == storage.ActionDiscard {
			t[a.Run] = true
		}
	}
	return t
}

// viewable reports whether the view decision d leaves of snapshot sn (sn
// less the runs d takes, storage.LeaveView) can stand for the group's
// next snapshot after a report, and for a truncated window the gap the
// report fills (the runs that shift into the next window): not with a
// discard_below (drain removes runs without a version bump), a wake set
// or pending (a fired wake clears wake_at without one), launch history
// (snapshots carry the launches), a paused group, a decision asked again
// on the next window (Again), a window of more than maxViewRuns; and only
// while this host leads and has room to keep it (Decision.View: the apply
// then records the version it leaves, the reference's anchor, and the
// gap).
func (c *Coordinator) viewable(sn storage.Snapshot, d storage.Decision) (bool, storage.ViewGap) {
	if !c.leading.Load() || len(sn.Waiting) > maxViewRuns || d.Below != 0 || d.WakeAt != 0 || d.Again ||
		!sn.Group.WakeAt.IsZero() || d.History || len(sn.Launches) > 0 || sn.Group.Paused {
		return false, storage.ViewGap{}
	}
	gap, ok := storage.GapOf(sn, taken(d))
	if !ok {
		return false, gap
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, had := c.views[sn.Group.Name]
	return had || len(c.views) < maxOffered, gap // room to keep it: else its reports hand back snapshots
}

// keepView keeps the view an applied decision left: sn, the snapshot it
// was decided on, less the runs it launched or discarded, at version (the
// apply's reply), when the decision was made viewable (Decision.View);
// otherwise it drops the group's view. A reference that already came for
// it is offered at once.
func (c *Coordinator) keepView(sn storage.Snapshot, d storage.Decision, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	group := sn.Group.Name
	if o, ok := c.offered[group]; ok && o.Group.Version < version {
		// handed back before this apply (a pass read the group before the
		// message came): deciding it would only be refused as stale
		delete(c.offered, group)
	}
	if !d.View || !c.leading.Load() {
		delete(c.views, group)
		if _, ok := c.refs[group]; ok {
			delete(c.refs, group)
			c.readDirty() // the reference waited for a view that will not come
		}
		return
	}
	v, gap, ok := storage.LeaveView(sn, taken(d))
	if !ok || gap != d.Gap {
		// (not so: viewable made the same view of the same snapshot)
		delete(c.views, group)
		c.readDirty()
		return
	}
	v.Group.Version = version
	if ref, ok := c.refs[group]; ok {
		delete(c.refs, group)
		if ref.Version == version+1 {
			delete(c.views, group)
			sn, good := ref.View(v, gap)
			if !good || !c.offerLocked(sn) {
				c.readDirty()
				return
			}
			c.rt.count("snapshots.by_reference")
			return
		}
		c.readDirty() // not this view's: the group is decided from a read of dirty
	}
	if c.views == nil {
		c.views = map[string]keptView{}
	}
	if _, had := c.views[group]; had || len(c.views) < maxOffered {
		c.views[group] = keptView{sn: v, gap: gap}
	}
}

// dropView forgets the group's view (its apply failed or its outcome is
// unknown).
func (c *Coordinator) dropView(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.views, group)
	if _, ok := c.refs[group]; ok {
		delete(c.refs, group)
		c.readDirty() // the reference waited for this view
	}
}

// takeOffered removes and returns the offered snapshots of groups.
func (c *Coordinator) takeOffered(groups []string) map[string]storage.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.offered) == 0 {
		return nil
	}
	out := map[string]storage.Snapshot{}
	for _, g := range groups {
		if sn, ok := c.offered[g]; ok {
			out[g] = sn
			delete(c.offered, g)
		}
	}
	return out
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

// fail records a policy failure of group: backoff doubling up to MaxBackoff.
func (c *Coordinator) fail(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backoff == nil {
		c.backoff = map[string]backoffState{}
	}
	b := c.backoff[group]
	if b.delay == 0 {
		b.delay = c.rt.cfg.Backoff
	} else {
		b.delay = min(2*b.delay, c.rt.cfg.MaxBackoff)
	}
	b.until = time.Now().Add(b.delay)
	c.backoff[group] = b
}

func (c *Coordinator) succeed(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.backoff, group)
}

// outcome counts a decision outcome (metrics + /status counters).
func (c *Coordinator) outcome(policy, version, outcome string) {
	c.rt.m.decision(policy, version, outcome)
	c.rt.count("decisions." + outcome)
}

// policyOutcome classifies an error of DecideSerial.
func policyOutcome(err error) string {
	switch {
	case errors.Is(err, policies.ErrTimeout):
		return OutcomeTimeout
	case errors.Is(err, policies.ErrTrap):
		return OutcomeTrap
	case errors.Is(err, policies.ErrInvalidDecision):
		return OutcomeInvalid
	}
	return OutcomeError
}

// decideBatch takes a batch of groups from snapshot to apply: their
// snapshots (those a report handed back, and the others read in one
// pipeline: storage.Store.SnapshotBatch), each group's policy decision,
// then the decisions' fenced applies in one pipeline
// (storage.Store.ApplyBatch). Outcomes are per group. It reports whether it
// changed something; it returns only storage.ErrFenced or ctx errors.
func (c *Coordinator) decideBatch(ctx context.Context, lease *leader.Lease, groups []string) (bool, error) {
	log := c.rt.log
	snaps := c.snapshots(ctx, groups)
	type pending struct {
		policy, version string
		waits           []time.Duration // of its launches: submit to the snapshot's now
		sn              storage.Snapshot
	}
	var (
		ds      []storage.GroupDecision
		meta    []pending
		scratch abi.SerialDecision // each decision is copied into the store's form at once
	)
	for i, group := range groups {
		sn, err := snaps[i].Snapshot, snaps[i].Err
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			log.Warn("snapshot failed", "group", group, "err", err)
			c.outcome("", "", OutcomeError)
			c.fail(group)
			continue
		}
		d, ver, ok, err := c.decideOne(ctx, lease, sn, &scratch)
		if err != nil {
			return false, err
		}
		if ok {
			ds = append(ds, storage.GroupDecision{Group: group, Decision: d})
			meta = append(meta, pending{policy: d.Policy, version: ver, waits: launchWaits(sn, d.Actions), sn: sn})
		}
	}
	if len(ds) == 0 {
		return false, nil
	}
	if c.beforeApply != nil {
		for _, gd := range ds {
			c.beforeApply(gd.Group)
		}
	}
	if !lease.Valid() {
		return false, nil // the term is ending: decide nothing more
	}
	res := c.rt.st.ApplyBatch(ctx, lease.Fence(), ds)
	queued, placed := 0, 0
	defer func() {
		if queued > 0 {
			wakeUp(c.rt.slots.wake) // launches wait in the LAUNCHED queue: allocate now
		}
		if placed > 0 {
			c.rt.restore.assigned()
		}
	}()
	worked := false
	var fenced error
	for i, r := range res {
		group, d, policy, ver, err := ds[i].Group, ds[i].Decision, meta[i].policy, meta[i].version, r.Err
		if err == nil && len(d.Actions) > 0 {
			c.keepView(meta[i].sn, d, r.Version) // a settle writes no dv
		} else {
			c.dropView(group)
		}
		switch {
		case err == nil || errors.Is(err, storage.ErrDuplicate):
			c.succeed(group)
			if err == nil {
				launches := 0
				for _, a := range d.Actions {
					if a.Kind == storage.ActionLaunch {
						launches++
					}
				}
				queued += r.Queued
				placed += launches - r.Queued
				if len(meta[i].waits) > 0 {
					c.rt.acc.launched(group, meta[i].waits)
				}
			}
			if d.Below > 0 {
				wakeUp(c.rt.drain.wake)
			}
			if d.Again {
				c.more.Store(true) // the apply kept it dirty: the next window
			}
			if len(d.Actions) == 0 {
				c.outcome(policy, ver, OutcomeSettled)
				log.Debug("group settled", "group", group, "policy", policy, "version", ver, "group_version", d.Version)
			} else {
				c.outcome(policy, ver, OutcomeApplied)
				log.Debug("decision applied", "group", group, "policy", policy, "version", ver,
					"group_version", d.Version, "actions", len(d.Actions))
			}
			worked = true
		case errors.Is(err, storage.ErrFenced):
			c.outcome(policy, ver, OutcomeFenced)
			if fenced == nil {
				log.Warn("decision fenced: no longer the leader", "group", group, "epoch", lease.Epoch(), "err", err)
				fenced = err
			}
		case errors.Is(err, storage.ErrStale):
			c.outcome(policy, ver, OutcomeStale)
			c.rt.m.stale.WithLabelValues(c.rt.m.ns, "apply").Inc()
			log.Debug("decision stale: group changed since its snapshot; deciding again next pass", "group", group,
				"group_version", d.Version, "err", err)
			worked = true // the group is still dirty: look again at once
			c.more.Store(true)
		case ctx.Err() != nil:
			return worked, ctx.Err()
		default:
			c.outcome(policy, ver, OutcomeError)
			log.Warn("apply failed; group left dirty", "group", group, "policy", policy, "err", err)
			c.fail(group)
		}
	}
	if fenced != nil {
		return false, fenced
	}
	return worked, nil
}

// snapshots returns the batch's snapshots in order: the offered ones, and
// the others read in one pipelined round trip.
func (c *Coordinator) snapshots(ctx context.Context, groups []string) []storage.SnapshotResult {
	offered := c.takeOffered(groups)
	c.rt.countN("snapshots.handed_back", len(offered))
	c.rt.countN("snapshots.read", len(groups)-len(offered))
	if len(offered) == 0 {
		return c.rt.st.SnapshotBatch(ctx, groups)
	}
	out := make([]storage.SnapshotResult, len(groups))
	var read []string
	for _, g := range groups {
		if _, ok := offered[g]; !ok {
			read = append(read, g)
		}
	}
	got := c.rt.st.SnapshotBatch(ctx, read)
	for i, j := 0, 0; i < len(groups); i++ {
		if sn, ok := offered[groups[i]]; ok {
			out[i].Snapshot = sn
			continue
		}
		out[i] = got[j]
		j++
	}
	return out
}

// decideOne asks the group's policy for a decision on sn. ok is false when
// there is nothing to apply (policy unavailable or failed: counted, backed
// off); err is only a ctx error. The policy's decision is written into dec
// (the caller's scratch, reused from one group to the next).
func (c *Coordinator) decideOne(ctx context.Context, lease *leader.Lease, sn storage.Snapshot, dec *abi.SerialDecision) (d storage.Decision, version string, ok bool, err error) {
	log := c.rt.log
	group, policy := sn.Group.Name, sn.Group.Policy
	if sn.Group.Paused {
		// A paused group is not decided: settle it (the empty decision
		// takes it out of dirty at this version; a resume marks it again).
		c.rt.count("decisions.paused")
		return storage.Decision{Version: sn.Group.Version, ClaimID: claimID(lease.Epoch(), sn.Group)}, "", true, nil
	}
	ref, err := c.rt.set.Acquire(ctx, policy)
	if err != nil {
		if ctx.Err() != nil {
			return d, "", false, ctx.Err()
		}
		log.Warn("policy unavailable; group left dirty", "group", group, "policy", policy, "err", err)
		c.outcome(policy, "", OutcomeError)
		c.fail(group)
		return d, "", false, nil
	}
	defer ref.Release()
	in, err := SerialSnapshot(sn)
	if err != nil {
		log.Warn("snapshot unusable; group left dirty", "group", group, "err", err)
		c.outcome(policy, ref.Version, OutcomeError)
		c.fail(group)
		return d, "", false, nil
	}
	t0 := time.Now()
	err = ref.Policy.DecideSerialInto(ctx, in, dec)
	took := time.Since(t0)
	c.rt.m.call(policy, "serial", took)
	c.markSpeed(group, took)
	if err != nil {
		if ctx.Err() != nil {
			return d, "", false, ctx.Err()
		}
		oc := policyOutcome(err)
		log.Warn("policy decision rejected; group left dirty", "group", group, "policy", policy,
			"version", ref.Version, "outcome", oc, "err", err)
		c.outcome(policy, ref.Version, oc)
		ref.Failed(ctx, oc, err) // auto-rollback after K in a row (hotswap.go)
		c.fail(group)
		return d, "", false, nil
	}
	ref.Succeeded()
	d = storage.Decision{
		Version:        sn.Group.Version,
		ClaimID:        claimID(lease.Epoch(), sn.Group),
		Policy:         policy,
		PolicyVersion:  ref.Version,
		PolicySHA256:   ref.SHA256,
		PolicyRegistry: ref.Registry,
		Actions:        make([]storage.Action, len(dec.Actions)),
		Below:          int64(min(dec.Below, math.MaxInt64)),
		BelowReason:    dec.BelowReason,
		WakeAt:         dec.Wake,
		// launch history: for a policy that can read it (ABI v4), not the
		// built-ins, which never do
		History: ref.Policy.ABIVersion() >= 4 && ref.Registry != 0,
		// A version 1 policy cannot act beyond the window: after it acted,
		// ask it again on the next window, until it settles. A version 2
		// decision is complete for the whole group (discard_below).
		Again: sn.Truncated() && ref.Policy.ABIVersion() < 2,
		// While the oldest LAUNCHED run waits for slots, launches queue
		// behind it (no run overtakes one that waits for slots).
		NoPlace: c.noPlace || c.rt.slots.waiting.Load(),
	}
	for i, a := range dec.Actions {
		d.Actions[i] = storage.Action{Kind: storage.ActionKind(a.Kind.String()), Run: a.Run, Reason: a.Reason}
	}
	d.View, d.Gap = c.viewable(sn, d)
	return d, ref.Version, true, nil
}

// launchWaits is how long each run a decision launches waited: the
// snapshot's now less its submit time.
func launchWaits(sn storage.Snapshot, acts []storage.Action) []time.Duration {
	var out []time.Duration
	var byID map[string]time.Time // a big decision: an index, not a scan per launch
	if len(acts) > 16 {
		byID = make(map[string]time.Time, len(sn.Waiting))
		for i := range sn.Waiting {
			byID[sn.Waiting[i].ID] = sn.Waiting[i].SubmittedAt
		}
	}
	for _, a := range acts {
		if a.Kind != storage.ActionLaunch {
			continue
		}
		if byID != nil {
			if t, ok := byID[a.Run]; ok {
				out = append(out, max(sn.Now.Sub(t), 0))
			}
			continue
		}
		for i := range sn.Waiting {
			if w := &sn.Waiting[i]; w.ID == a.Run {
				out = append(out, max(sn.Now.Sub(w.SubmittedAt), 0))
				break
			}
		}
	}
	return out
}

// claimID names a decision: EPOCH:GROUP#GEN:VERSION, unique within the
// namespace (one decision per term, group incarnation and version; a group
// made before incarnations, gen 0, is EPOCH:GROUP:VERSION).
func claimID(epoch int64, g storage.Group) string {
	if g.Gen == 0 {
		return fmt.Sprintf("%d:%s:%d", epoch, g.Name, g.Version)
	}
	return fmt.Sprintf("%d:%s#%d:%d", epoch, g.Name, g.Gen, g.Version)
}

// SerialSnapshot converts a storage snapshot into the ABI record a serial
// policy is given: the coordinator's input and `policy dry-run --group`'s,
// so both see the same record. A run in a state a policy never sees is an
// error (the group is not decided).
func SerialSnapshot(sn storage.Snapshot) (*abi.SerialSnapshot, error) {
	out := &abi.SerialSnapshot{
		Group:         sn.Group.Name,
		Policy:        sn.Group.Policy,
		MaxActive:     uint32(max(sn.Group.MaxActive, 0)),
		Now:           sn.Now.UnixMilli(),
		Active:        make([]abi.Run, 0, len(sn.Active)),
		Waiting:       make([]abi.Run, 0, len(sn.Waiting)),
		WaitingTotal:  uint32(min(max(sn.WaitingTotal, len(sn.Waiting)), math.MaxUint32)),
		WaitingOldest: uint32(min(max(sn.WaitingOldest, 0), len(sn.Waiting))),
		Params:        sn.Group.Params,
		Launches:      sn.Launches,
	}
	for _, list := range []struct {
		src []storage.Run
		dst *[]abi.Run
	}{{sn.Active, &out.Active}, {sn.Waiting, &out.Waiting}} {
		for _, r := range list.src {
			ar, err := toABIRun(r)
			if err != nil {
				return nil, fmt.Errorf("host: group %s: %w", sn.Group.Name, err)
			}
			*list.dst = append(*list.dst, ar)
		}
	}
	return out, nil
}

// toABIRun converts a run of an active state or WAITING.
func toABIRun(r storage.Run) (abi.Run, error) {
	st, err := abi.ParseState(string(r.State))
	if err != nil {
		return abi.Run{}, fmt.Errorf("run %s is %q, a state no policy sees", r.ID, r.State)
	}
	return abi.Run{
		ID: r.ID, Seq: uint64(max(r.Seq, 0)), State: st, Priority: int32(r.Priority),
		Slots: uint32(max(r.Slots, 0)), SubmittedAt: unixMilli(r.SubmittedAt), StartedAt: unixMilli(r.StartedAt),
		Labels: r.Labels, NotBefore: unixMilli(r.NotBefore),
		Attempt: uint32(max(r.Attempt, 0)), MaxAttempts: uint32(max(r.MaxAttempts, 0)),
	}, nil
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// clearBackoff lets every backed-off group be decided again at once (a new
// policy version may fix it).
func (c *Coordinator) clearBackoff() {
	c.mu.Lock()
	c.backoff = nil
	c.mu.Unlock()
}
