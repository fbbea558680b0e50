package abi

// Allocation (kind 3): which LAUNCHED runs of a namespace get slots, in
// which order. The host reads the runs waiting for slots and the free
// capacity, asks the namespace's allocation policy for an order, and
// places the runs in that order, each all of its slots or none (backfill:
// a run that does not fit is passed over, unless it has waited past the
// namespace's slot guard; then the pass stops at it and freed slots are
// held for it). A run the order leaves out waits for a later pass. ABI.md
// "Allocation snapshot".

// Allocation parameters the built-ins read (AllocationSnapshot.Params).
const (
	// ParamFairLabel names the label whose values share the slots
	// (built-in "fair"); runs without it share as the value "".
	ParamFairLabel = "fair_label"
	// ParamWeights is "value=weight,..." (weights 1 to 1000; a value not
	// named weighs 1).
	ParamWeights = "weights"
)

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
}

// WorkerCapacity is one live worker's slots.
type WorkerCapacity struct {
	Worker string
	Slots  uint32 // slots it registered
	Free   uint32 // of them free now
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
}

// Reset empties d, keeping its capacity.
func (d *AllocationDecision) Reset() { d.Order = d.Order[:0] }
