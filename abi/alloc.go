package abi

// Allocation (kind 3): which LAUNCHED runs of a namespace get slots, in
// which order. The host reads the runs waiting for slots and the free
// capacity, asks the namespace's allocation policy for an order, and
// places the runs in that order, each all of its slots or none (backfill:
// a run that does not fit is passed over, unless it has waited past the
// namespace's slot guard; then the pass stops at it and freed slots are
// held for it). A run the order leaves out waits for a later pass. ABI.md
// "Allocation snapshot".
//
// Placement (version 5): a run may go only to a worker that serves its
// group and carries every label it requires (AllocRun.Require); the
// snapshot says both of each live worker, and a decision may name the
// worker each run of its order takes all of its slots on
// (AllocationDecision.Workers). The host refuses a decision that names a
// worker a run may not use or that has too few free slots for the runs
// named on it.
//
// Preferences (version 6): a run may also prefer labels, each with a
// weight (AllocRun.Prefer); they are soft: a worker without them still
// takes the run, but among the workers that take it and have its slots
// free the host places it on one with the highest score
// (WorkerCapacity.Score) first.

// Allocation parameters the built-ins read (AllocationSnapshot.Params).
const (
	// ParamFairLabel names the label whose values share the slots
	// (built-in "fair"); runs without it share as the value "".
	ParamFairLabel = "fair_label"
	// ParamWeights is "value=weight,..." (weights 1 to 1000; a value not
	// named weighs 1).
	ParamWeights = "weights"
	// ParamPlacement chooses the worker of each placed run: "spread"
	// (the eligible worker with the most free slots), "pack" (the eligible
	// worker with the fewest free slots the run still fits: fill one
	// before the next) or "policy" (the worker the allocation policy names,
	// version 5; spread for a run it names none for). Set, it sends every
	// launch through the allocation pass; unset, a run takes the first free
	// slots it may use, in worker identity order.
	ParamPlacement = "placement"
)

// Placements the host makes (ParamPlacement).
const (
	PlacementSpread = "spread"
	PlacementPack   = "pack"
	PlacementPolicy = "policy"
)

// HostChooses in AllocationDecision.Workers leaves the worker of a run to
// the host (ParamPlacement "policy": spread).
const HostChooses int32 = -1

// MaxAllocationUsage bounds AllocationSnapshot.Usage: the host sends the
// groups and label values with the most slots in use first.
const MaxAllocationUsage = 4096

// AllocRun is one LAUNCHED run waiting for slots.
type AllocRun struct {
	ID         string
	Group      string
	Seq        uint64 // namespace-wide submit counter: FIFO order
	LaunchedAt int64  // unix ms: when its launch was applied
	Priority   int32
	Slots      uint32  // slots it needs, all at once (0 is read as 1)
	Labels     []Label // sorted by key
	// Require is what a worker must carry to take it (its group's
	// requirements and its own, sorted by key; version 5).
	Require []Label
	// Prefer is what it would rather have (its group's preferences and
	// its own, sorted by key; version 6): soft, weighted.
	Prefer []Preference
}

// Preference is a label a run would rather its worker carried (version 6):
// a worker with Key=Value adds Weight (1 to 1000) to its score for the run.
type Preference struct {
	Key, Value string
	Weight     uint32
}

// Score is the sum of the weights of r's preferences w carries (0: none,
// or r has none).
func (w *WorkerCapacity) Score(r *AllocRun) uint32 {
	var n uint32
	for _, p := range r.Prefer {
		for _, l := range w.Labels {
			if l.Key == p.Key {
				if l.Value == p.Value {
					n += p.Weight
				}
				break
			}
		}
	}
	return n
}

// WorkerCapacity is one live worker's slots and placement profile.
type WorkerCapacity struct {
	Worker string
	Slots  uint32 // slots it registered
	Free   uint32 // of them free now (a draining worker has none)
	// Labels the worker carries, sorted by key (version 5).
	Labels []Label
	// Groups it serves: names or patterns ('*' matches any text); none:
	// every group (version 5).
	Groups []string
}

// Serves reports whether w takes runs of group.
func (w *WorkerCapacity) Serves(group string) bool {
	if len(w.Groups) == 0 {
		return true
	}
	for _, pat := range w.Groups {
		if MatchGroup(pat, group) {
			return true
		}
	}
	return false
}

// Carries reports whether w has every label of req (same key and value).
func (w *WorkerCapacity) Carries(req []Label) bool {
	for _, r := range req {
		ok := false
		for _, l := range w.Labels {
			if l.Key == r.Key {
				ok = l.Value == r.Value
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Takes reports whether r may run on w: w serves r's group and carries
// every label r requires (its free slots aside).
func (w *WorkerCapacity) Takes(r *AllocRun) bool { return w.Serves(r.Group) && w.Carries(r.Require) }

// MatchGroup reports whether group matches pat, a group name or a pattern
// where '*' matches any text (a worker's groups).
func MatchGroup(pat, group string) bool {
	i := 0
	for i < len(pat) && pat[i] != '*' {
		i++
	}
	if i == len(pat) {
		return pat == group
	}
	if len(group) < i || group[:i] != pat[:i] {
		return false
	}
	group, pat = group[i:], pat[i+1:]
	for {
		j := 0
		for j < len(pat) && pat[j] != '*' {
			j++
		}
		if j == len(pat) { // the last part: a suffix
			return len(group) >= len(pat) && group[len(group)-len(pat):] == pat
		}
		part := pat[:j]
		k := index(group, part)
		if k < 0 {
			return false
		}
		group, pat = group[k+len(part):], pat[j+1:]
	}
}

// index is strings.Index (abi imports no package the guests need not).
func index(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// SlotUsage is what one group (Key "") or one label value (Key the label)
// holds of the namespace's slots now, over its RUNNING and STOPPING runs.
type SlotUsage struct {
	Key   string // "" = Value is a group name; else a label key
	Value string
	Slots uint32 // slots in use
	Runs  uint32 // runs holding them
}

// AllocationSnapshot is the input of an allocation decision.
type AllocationSnapshot struct {
	Now   int64  // unix ms, Redis time
	Free  uint32 // free slots on live workers
	Total uint32 // slots of live workers
	// LaunchedTotal is how many runs wait for slots in all. When it is
	// more than len(Runs) the runs are a window: the first Oldest are the
	// oldest waiting, the rest the newest.
	LaunchedTotal uint32
	Oldest        uint32
	Runs          []AllocRun       // seq ascending within each part
	Workers       []WorkerCapacity // live workers, by identity
	Usage         []SlotUsage      // groups first, then label values
	Params        []Label          // the namespace's allocation parameters, sorted by name
}

// Param returns the value of parameter name ("" and false if unset).
func (s *AllocationSnapshot) Param(name string) (string, bool) {
	for i := range s.Params {
		if s.Params[i].Key == name {
			return s.Params[i].Value, true
		}
	}
	return "", false
}

// AllocationDecision is the output of an allocation decision: the runs to
// try, by their index in AllocationSnapshot.Runs, in the order they should
// get slots. Each index at most once; a run not named waits.
type AllocationDecision struct {
	Order []uint32
	// Workers (version 5; empty: the host places every run) holds, for
	// each entry of Order, the index in AllocationSnapshot.Workers of the
	// worker that run takes all of its slots on, or HostChooses. The
	// worker must take the run (WorkerCapacity.Takes) and have the free
	// slots of every run named on it. The host uses them when the
	// namespace's placement is "policy" (ParamPlacement).
	Workers []int32
}

// Place appends run (an index into the snapshot's runs) to the order, on
// worker (an index into its workers, or HostChooses).
func (d *AllocationDecision) Place(run uint32, worker int32) {
	for len(d.Workers) < len(d.Order) {
		d.Workers = append(d.Workers, HostChooses)
	}
	d.Order = append(d.Order, run)
	d.Workers = append(d.Workers, worker)
}

// Reset empties d, keeping its capacity.
func (d *AllocationDecision) Reset() { d.Order, d.Workers = d.Order[:0], d.Workers[:0] }
