package engine

import (
	"sort"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

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
