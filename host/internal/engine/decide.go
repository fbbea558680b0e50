package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

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
	var t0 time.Time
	if c.rt.spans != nil {
		t0 = time.Now() // the decision spans' start: the batch's snapshots, decisions and applies
	}
	ds, meta, err := c.decideGroups(ctx, lease, groups)
	if err != nil || len(ds) == 0 {
		return false, err
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
			q, p := c.applied(group, d, &meta[i], err == nil, r.Queued)
			if err == nil && c.rt.spans != nil {
				c.rt.spans.add(group, d, lease.Epoch(), t0, time.Now())
			}
			queued, placed = queued+q, placed+p
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

// pendingApply is what decideBatch keeps of a decision until its apply
// answers.
type pendingApply struct {
	policy, version string
	waits           []time.Duration // of its launches: submit to the snapshot's now
	sn              storage.Snapshot
}

// decideGroups snapshots groups and asks each one's policy, returning the
// decisions to apply. A group whose snapshot failed is backed off and
// left out; an error is the context's or a lease's end.
func (c *Coordinator) decideGroups(ctx context.Context, lease *leader.Lease, groups []string) ([]storage.GroupDecision, []pendingApply, error) {
	snaps := c.snapshots(ctx, groups)
	var (
		ds      []storage.GroupDecision
		meta    []pendingApply
		scratch abi.SerialDecision // each decision is copied into the store's form at once
	)
	for i, group := range groups {
		sn, err := snaps[i].Snapshot, snaps[i].Err
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			c.rt.log.Warn("snapshot failed", "group", group, "err", err)
			c.outcome("", "", OutcomeError)
			c.fail(group)
			continue
		}
		d, ver, ok, err := c.decideOne(ctx, lease, sn, &scratch)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			ds = append(ds, storage.GroupDecision{Group: group, Decision: d})
			meta = append(meta, pendingApply{policy: d.Policy, version: ver, waits: launchWaits(sn, d.Actions), sn: sn})
		}
	}
	return ds, meta, nil
}

// applied records a decision the store applied (fresh: not a replay of
// one applied before) and returns how many of its launches were queued
// for the slot manager and how many the apply placed.
func (c *Coordinator) applied(group string, d storage.Decision, m *pendingApply, fresh bool, queuedN int) (queued, placed int) {
	c.succeed(group)
	if fresh {
		launches := 0
		for _, a := range d.Actions {
			if a.Kind == storage.ActionLaunch {
				launches++
			}
		}
		queued, placed = queuedN, launches-queuedN
		if len(m.waits) > 0 {
			c.rt.acc.launched(group, m.waits)
		}
	}
	if d.Below > 0 {
		wakeUp(c.rt.drain.wake)
	}
	if d.Again {
		c.more.Store(true) // the apply kept it dirty: the next window
	}
	if len(d.Actions) == 0 {
		c.outcome(m.policy, m.version, OutcomeSettled)
		c.rt.log.Debug("group settled", "group", group, "policy", m.policy, "version", m.version, "group_version", d.Version)
	} else {
		c.outcome(m.policy, m.version, OutcomeApplied)
		c.rt.log.Debug("decision applied", "group", group, "policy", m.policy, "version", m.version,
			"group_version", d.Version, "actions", len(d.Actions))
	}
	return queued, placed
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
		// behind it (no run overtakes one that waits for slots); with a
		// placement every launch goes through the slot manager's pass.
		NoPlace: c.noPlace || c.rt.slots.waiting.Load() || c.rt.slots.placingNow(ctx),
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

// clearBackoff lets every backed-off group be decided again at once (a new
// policy version may fix it).
func (c *Coordinator) clearBackoff() {
	c.mu.Lock()
	c.backoff = nil
	c.mu.Unlock()
}
