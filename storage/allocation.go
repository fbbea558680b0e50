package storage

import (
	"context"
	"fmt"

	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// AllocationSettings is how a namespace's LAUNCHED runs get slots
// (namespace set --allocate): the allocation policy and its parameters.
// FairLabel and Weights are the parameters the built-in "fair" reads
// (abi.ParamFairLabel, abi.ParamWeights); Params holds any other, for a
// pushed policy.
type AllocationSettings struct {
	Policy    string         // "" = DefaultAllocation
	FairLabel string         // fair: the label whose values share the slots ("" = across groups)
	Weights   map[string]int // fair: value -> weight (1..MaxWeight; a value not named weighs 1)
	Params    []abi.Label    // any other parameters, for the policy
}

// PolicyName is s.Policy, or DefaultAllocation when unset.
func (s AllocationSettings) PolicyName() string {
	if s.Policy == "" {
		return limits.DefaultAllocation
	}
	return s.Policy
}

// Placement is the placement parameter (abi.ParamPlacement: "" = the
// first free slots a run may take, in the scripts).
func (s AllocationSettings) Placement() string {
	for _, p := range s.Params {
		if p.Key == abi.ParamPlacement {
			return p.Value
		}
	}
	return ""
}

// Weight is value's weight (1 when not named).
func (s AllocationSettings) Weight(value string) int {
	if w, ok := s.Weights[value]; ok {
		return w
	}
	return 1
}

// AllParams is every parameter the policy is sent, sorted by name.
func (s AllocationSettings) AllParams() []abi.Label {
	out := slices.Clone(s.Params)
	if s.FairLabel != "" {
		out = append(out, abi.Label{Key: abi.ParamFairLabel, Value: s.FairLabel})
	}
	if len(s.Weights) > 0 {
		out = append(out, abi.Label{Key: abi.ParamWeights, Value: limits.FormatWeights(s.Weights)})
	}
	slices.SortFunc(out, func(a, b abi.Label) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Validate checks the settings (names, label key, weights, parameters).
func (s AllocationSettings) Validate() error {
	if s.Policy != "" {
		if err := limits.ValidateName("policy", s.Policy); err != nil {
			return err
		}
	}
	if s.FairLabel != "" {
		if err := limits.ValidLabel(s.FairLabel, ""); err != nil {
			return fmt.Errorf("fair label: %w", err)
		}
	}
	for v, w := range s.Weights {
		if v == "" || strings.ContainsAny(v, ",=") {
			return fmt.Errorf("weight for %q: a value must be non-empty, without ',' or '='", v)
		}
		if w < 1 || w > limits.MaxWeight {
			return fmt.Errorf("weight for %q: %d, want 1..%d", v, w, limits.MaxWeight)
		}
	}
	for _, p := range s.Params {
		if p.Key == abi.ParamFairLabel || p.Key == abi.ParamWeights {
			return fmt.Errorf("parameter %s: set it with the fair label and weights", p.Key)
		}
		if p.Key == abi.ParamPlacement && p.Value != abi.PlacementSpread && p.Value != abi.PlacementPack && p.Value != abi.PlacementPolicy {
			return fmt.Errorf("parameter %s: %q, want %s, %s or %s", p.Key, p.Value, abi.PlacementSpread, abi.PlacementPack, abi.PlacementPolicy)
		}
	}
	_, err := limits.NormalizeLabels("allocation parameters", s.AllParams(), abi.MaxParams)
	return err
}

// settingsFromHash builds the settings from the settings hash's fields.
func allocationFrom(policy, params string) AllocationSettings {
	s := AllocationSettings{Policy: policy}
	for _, p := range decodeLabels(params) {
		switch p.Key {
		case abi.ParamFairLabel:
			s.FairLabel = p.Value
		case abi.ParamWeights:
			s.Weights, _ = limits.ParseWeights(p.Value)
		default:
			s.Params = append(s.Params, p)
		}
	}
	return s
}

// SetAllocation sets the namespace's allocation settings (an operator's
// write, not fenced, like SetGroup): the leader's slot manager uses them
// from its next pass, and every host pre-loads the policy. Whether the
// policy exists and is of kind allocation is for the caller to check
// (host.CheckAllocationPolicy): storage does not know the built-ins.
func (s *Store) SetAllocation(ctx context.Context, a AllocationSettings) error {
	const op = "set allocation"
	if err := a.Validate(); err != nil {
		return invalid(op, "%v", err)
	}
	_, err := s.run(ctx, op, "set_allocation", []string{s.k.Settings(), s.k.PolicyGen()},
		a.Policy, encodeLabels(a.AllParams()), s.k.PolicyChannel())
	return err
}

// Allocation reads the namespace's allocation settings.
func (s *Store) Allocation(ctx context.Context) (AllocationSettings, error) {
	v, err := s.c.HMGet(ctx, s.k.Settings(), "allocate", "alloc_params").Result()
	if err != nil {
		return AllocationSettings{}, fmt.Errorf("storage: allocation settings: %w", err)
	}
	return allocationFrom(str(v[0]), str(v[1])), nil
}

// AllocationView is what one slot-manager pass reads before it asks the
// allocation policy (AllocationState: one pipelined round trip).
type AllocationView struct {
	Now          time.Time
	Settings     AllocationSettings
	SettingsRead bool // Settings were read (AllocationState withSettings)
	// Launched: the LAUNCHED runs waiting for slots, seq ascending; when
	// more than the window wait (Total), the Oldest first ones are the
	// oldest and the rest the newest.
	Launched      []string
	Total, Oldest int
	Workers       []abi.WorkerCapacity // live workers, by identity
	// Free and Slots: the free and all slots of live workers; a draining
	// worker's free slots are not free (no run is placed there: Draining)
	Free, Slots int
	// Holding maps each run holding slots of a live worker to how many.
	Holding map[string]int
	// FreeSlots (read with the settings) lists each live, not draining
	// worker's free slots ("worker#index"): where the pass may name the
	// slots of a run it places on a worker (AllocatePass).
	FreeSlots map[string][]string
}

// Window bounds of AllocationState: the oldest k and the newest k
// launched runs.
const (
	minAllocWindow = 32
)

// AllocWindow is the window k the slot manager reads with free slots
// free: clamp(4 · free, MinAllocWindow, MaxAllocWindow). An order needs
// enough runs to fill the free slots, and to see the queue's both ends;
// reading more costs Redis time on every pass (BENCHMARKS.md
// "Allocation policies").
func AllocWindow(free int) int { return min(limits.MaxAllocWindow, max(minAllocWindow, 4*free)) }

// AllocationState reads the allocation view with a window of the oldest
// k and the newest k launched runs (k clamped to 1..MaxAllocWindow):
// launched ids, live workers and their slots, and (withSettings) the
// settings and the workers' placement profiles (labels, groups and free
// slots: AllocationView.FreeSlots), in one pipelined round trip of direct commands (cheaper for
// Redis than a script building the same reply); a queue longer than 2k
// costs a second one for its newest k. O(k + workers + slots).
func (s *Store) AllocationState(ctx context.Context, k int, withSettings bool) (AllocationView, error) {
	var (
		head *redis.StringSliceCmd
		ws   *redis.ZSliceCmd
		sl   *redis.MapStringStringCmd
		tnow *redis.TimeCmd
		set  *redis.SliceCmd
		dr   *redis.StringSliceCmd
		pl   *redis.MapStringStringCmd
		v    AllocationView
	)
	k = min(max(k, 1), limits.MaxAllocWindow)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		head = p.ZRange(ctx, s.k.Launched(), 0, 2*int64(k)-1)
		ws = p.ZRangeWithScores(ctx, s.k.Workers(), 0, -1)
		sl = p.HGetAll(ctx, s.k.Slots())
		tnow = p.Time(ctx)
		dr = p.SMembers(ctx, s.k.Draining())
		if withSettings {
			set = p.HMGet(ctx, s.k.Settings(), "allocate", "alloc_params")
			pl = p.HGetAll(ctx, s.k.Placement())
		}
		return nil
	})
	if err != nil {
		return v, fmt.Errorf("storage: allocation state: %w", err)
	}
	v.Now = tnow.Val()
	if set != nil {
		sv := set.Val()
		v.Settings = allocationFrom(str(sv[0]), str(sv[1]))
		v.SettingsRead = true
	}
	v.Launched = head.Val()
	v.Total, v.Oldest = len(v.Launched), len(v.Launched)
	if len(v.Launched) == 2*k {
		// deeper than 2k, maybe: the newest k past the oldest k (a run
		// added or removed between the reads may show twice: the
		// caller dedupes)
		var tail *redis.StringSliceCmd
		var card *redis.IntCmd
		if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			card = p.ZCard(ctx, s.k.Launched())
			tail = p.ZRange(ctx, s.k.Launched(), -int64(k), -1)
			return nil
		}); err != nil {
			return v, fmt.Errorf("storage: allocation state: %w", err)
		}
		if v.Total = int(card.Val()); v.Total > 2*k {
			v.Launched = append(v.Launched[:k], tail.Val()...)
			v.Oldest = k
		}
	}
	var profiles map[string]string
	if pl != nil {
		profiles = pl.Val()
		if profiles == nil {
			profiles = map[string]string{} // (read: no worker has a profile)
		}
	}
	v.capacity(ws.Val(), sl.Val(), profiles, dr.Val())
	slices.SortFunc(v.Workers, func(a, b abi.WorkerCapacity) int { return strings.Compare(a.Worker, b.Worker) })
	return v, nil
}

// capacity fills v's live workers (with their profiles when read: not
// nil), slots, free slots and the runs holding them, from the workers
// zset, the slots hash and the draining workers.
func (v *AllocationView) capacity(workers []redis.Z, slots, profiles map[string]string, drainingIDs []string) {
	draining := make(map[string]bool, len(drainingIDs))
	for _, w := range drainingIDs {
		draining[w] = true
	}
	alive := map[string]int{}
	for _, z := range workers {
		id := z.Member.(string)
		if time.UnixMilli(int64(z.Score)).After(v.Now) {
			alive[id] = len(v.Workers)
			w := abi.WorkerCapacity{Worker: id}
			if profiles != nil {
				if prof, ok := profiles[id]; ok {
					p := decodePlacement(prof)
					w.Labels, w.Groups = p.Labels, p.Groups
				}
			}
			v.Workers = append(v.Workers, w)
		}
	}
	if profiles != nil {
		v.FreeSlots = map[string][]string{}
	}
	v.Holding = map[string]int{}
	for field, val := range slots {
		j := strings.LastIndexByte(field, '#')
		if j < 0 {
			continue
		}
		i, ok := alive[field[:j]]
		if !ok {
			continue
		}
		w := &v.Workers[i]
		w.Slots++
		v.Slots++
		if val == "" {
			if !draining[w.Worker] { // a draining worker's free slot takes no run
				w.Free++
				v.Free++
				if v.FreeSlots != nil {
					v.FreeSlots[w.Worker] = append(v.FreeSlots[w.Worker], field)
				}
			}
			continue
		}
		if run, _, ok := strings.Cut(val, "#"); ok {
			v.Holding[run]++
		}
	}
	for _, fs := range v.FreeSlots {
		slices.Sort(fs)
	}
}

// AllocInfo is what an allocation policy reads of one run: immutable
// while it is LAUNCHED or RUNNING, so the slot manager reads it once.
type AllocInfo struct {
	Run abi.AllocRun
	OK  bool // the run exists
}

// AllocInfos reads the allocation fields of runs: one HMGET of the
// launched runs' index (Keys.LaunchInfo) for all of them, then, for those
// not in it (runs holding slots, placed when launched), one pipelined
// HMGET per run.
func (s *Store) AllocInfos(ctx context.Context, ids []string) ([]AllocInfo, error) {
	out := make([]AllocInfo, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	vals, err := s.c.HMGet(ctx, s.k.LaunchInfo(), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: allocation infos: %w", err)
	}
	var miss []int
	for i, v := range vals {
		if r, ok := parseLaunchInfo(ids[i], str(v)); ok {
			out[i] = AllocInfo{OK: true, Run: r}
		} else {
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(miss))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range miss {
			cmds[j] = p.HMGet(ctx, s.k.Run(ids[i]), "group", "seq", "slots", "priority", "launched_at", "labels", "require")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: allocation infos: %w", err)
	}
	for j, c := range cmds {
		f := c.Val()
		if len(f) < 7 || f[0] == nil {
			continue
		}
		slots, _ := strconv.Atoi(str(f[2]))
		prio, _ := strconv.Atoi(str(f[3]))
		seq, _ := strconv.ParseUint(str(f[1]), 10, 64)
		at, _ := strconv.ParseInt(str(f[4]), 10, 64)
		i := miss[j]
		r := abi.AllocRun{ID: ids[i], Group: str(f[0]), Seq: seq, Slots: uint32(max(slots, 1)),
			Priority: int32(prio), LaunchedAt: at, Labels: decodeLabels(str(f[5]))}
		r.Require, r.Prefer = placeOf(str(f[6]))
		out[i] = AllocInfo{OK: true, Run: r}
	}
	return out, nil
}

// placeOf decodes a run's stored requirements as a policy sees them: the
// labels required and the preferences (not the same-worker flag: a
// placement always puts a run on one worker).
func placeOf(s string) ([]abi.Label, []abi.Preference) {
	req, _, prefer := splitReq(decodeLabels(s))
	return req, prefer
}

// parseLaunchInfo parses a Keys.LaunchInfo entry, "seq,slots,priority,
// launched_ms,group,labels" (labels followed by 0x1e and the run's
// requirements when it has some: apply.lua).
func parseLaunchInfo(id, v string) (abi.AllocRun, bool) {
	p := strings.SplitN(v, ",", 6)
	if len(p) != 6 {
		return abi.AllocRun{}, false
	}
	seq, err1 := strconv.ParseUint(p[0], 10, 64)
	slots, err2 := strconv.Atoi(p[1])
	prio, err3 := strconv.Atoi(p[2])
	at, err4 := strconv.ParseInt(p[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || p[4] == "" {
		return abi.AllocRun{}, false
	}
	ls, req, _ := strings.Cut(p[5], "\x1e")
	r := abi.AllocRun{ID: id, Group: p[4], Seq: seq, Slots: uint32(max(slots, 1)), Priority: int32(prio), LaunchedAt: at,
		Labels: decodeLabels(ls)}
	r.Require, r.Prefer = placeOf(req)
	return r, true
}
