package policies

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"unsafe"

	"github.com/wasmsched/wasmsched/abi"
)

// Bounds of what a rejected decision makes the host report: at most
// maxProblems problems are listed (the rest counted), and a run id is
// quoted with at most maxQuotedID bytes.
const (
	maxProblems = 8
	maxQuotedID = 64
)

// problems collects validation problems, formatting at most maxProblems.
type problems struct {
	list []string
	more int
}

func (p *problems) add(format string, args ...any) {
	if len(p.list) >= maxProblems {
		p.more++
		return
	}
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p problems) empty() bool { return len(p.list) == 0 }

func (p *problems) err(snapshot bool) *ValidationError {
	return &ValidationError{Problems: p.list, More: p.more, snapshot: snapshot}
}

// qid quotes a run id for a message, at most maxQuotedID bytes of it.
func qid(id string) string {
	if len(id) <= maxQuotedID {
		return strconv.Quote(id)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(id[:maxQuotedID]), len(id))
}

// validator holds reusable scratch for validation (one per instance, or a
// fresh one for the package-level functions). Once warm it validates
// without allocating (unless it finds problems to report).
type validator struct {
	// run id -> index (active first, then waiting): an open-addressing
	// table of the id's hash's high 32 bits and 1+index (0 = empty), at
	// least twice the number of runs, reused across calls. Cheaper than a
	// Go map for the few dozen runs of a snapshot: no per-call clear of a
	// map, one hash per id, ids compared only when the tags match.
	slots   []uint64
	seed    maphash.Seed
	k0, k1  uint64       // keys of hash's inline path
	seen    []int32      // per run: 1 + index of the action naming it, or 0
	maxID   int          // longest run id of the indexed snapshot
	idBytes int          // the bytes of all its run ids
	actions []abi.Action // decode scratch
	idx     []int32      // per action: the run it names (-1: none), see resolve
	refs    []uint32     // decode scratch: the indexes of an indexed decision
	indexed bool         // the decision names its runs by index (ABI v3)
	abi     uint32       // the deciding module's ABI version (0: the newest)
}

// resolveRefs fills v.idx from the run indexes of an indexed decision
// (abicodec.DecisionRunIndex): -1 for an index beyond the snapshot's runs.
func (v *validator) resolveRefs(s *abi.SerialSnapshot, refs []uint32) {
	n := uint32(len(s.Active) + len(s.Waiting))
	v.idx = v.idx[:0]
	for _, r := range refs {
		j := int32(-1)
		if r < n {
			j = int32(r)
		}
		v.idx = append(v.idx, j)
	}
}

// resolve fills v.idx with the run each action of d names, or -1, through
// the hash index of the snapshot's ids (an id longer than any run's is not
// hashed). d may alias guest memory: nothing is copied.
func (v *validator) resolve(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	v.idx = v.idx[:0]
	for i := range d.Actions {
		id := d.Actions[i].Run
		j := -1
		if len(id) <= v.maxID {
			if k, ok := v.lookup(s, id); ok {
				j = k
			}
		}
		v.idx = append(v.idx, int32(j))
	}
}

func (v *validator) run(s *abi.SerialSnapshot, j int) *abi.Run {
	if j < len(s.Active) {
		return &s.Active[j]
	}
	return &s.Waiting[j-len(s.Active)]
}

// hash hashes a run id for the index. Ids of 8 to 16 bytes (most: the
// store's are 10 to 26) are mixed inline from their first and last 8 bytes
// (which together cover every byte) with the validator's random keys, as
// wyhash does for short inputs and as Go's own maps do where the CPU has
// no AES: a snapshot's ids cannot be chosen to collide without the keys.
// Other lengths go through hash/maphash.
func (v *validator) hash(id string) uint64 {
	if n := len(id); n >= 8 && n <= 16 {
		p := unsafe.Pointer(unsafe.StringData(id))
		a := *(*uint64)(p) // unaligned loads: fine on the platforms wazero compiles for
		b := *(*uint64)(unsafe.Add(p, n-8))
		hi, lo := bits.Mul64(a^v.k0, b^v.k1^uint64(n))
		return hi ^ lo
	}
	return maphash.String(v.seed, id)
}

// lookup returns the index of the run with this id in the indexed s.
func (v *validator) lookup(s *abi.SerialSnapshot, id string) (int, bool) {
	mask := uint64(len(v.slots) - 1)
	h := v.hash(id)
	tag := h &^ slotIndex
	for i := h & mask; ; i = (i + 1) & mask {
		e := v.slots[i]
		if e == 0 {
			return 0, false
		}
		if j := int(e&slotIndex) - 1; e&^slotIndex == tag && v.run(s, j).ID == id {
			return j, true
		}
	}
}

// insert adds run j (of s) unless its id is already indexed; it reports
// whether it added it.
func (v *validator) insert(s *abi.SerialSnapshot, j int, id string) bool {
	mask := uint64(len(v.slots) - 1)
	h := v.hash(id)
	tag := h &^ slotIndex
	for i := h & mask; ; i = (i + 1) & mask {
		e := v.slots[i]
		if e == 0 {
			v.slots[i] = tag | uint64(j+1)
			return true
		}
		if e&^slotIndex == tag && v.run(s, int(e&slotIndex)-1).ID == id {
			return false
		}
	}
}

// slotIndex masks the run's 1 + index in an entry of validator.slots; the
// bits above it are the id's hash's (a tag compared before the ids are).
const slotIndex = 1<<32 - 1

// indexSerial indexes s's runs and returns the snapshot's problems: empty or
// duplicate ids, wrong states, lists not sorted by seq.
func (v *validator) indexSerial(s *abi.SerialSnapshot) problems {
	n := len(s.Active) + len(s.Waiting)
	size := 16
	for size < 2*n {
		size *= 2
	}
	if len(v.slots) < size || len(v.slots) > 4*size {
		v.slots = make([]uint64, size)
	} else {
		clear(v.slots)
	}
	if v.seed == (maphash.Seed{}) {
		v.seed = maphash.MakeSeed()
		v.k0, v.k1 = rand.Uint64()|1, rand.Uint64()
	}
	v.maxID, v.idBytes = 0, 0
	var probs problems
	v.indexList(&probs, s, "active", s.Active, 0, true)
	v.indexList(&probs, s, "waiting", s.Waiting, len(s.Active), false)
	return probs
}

// indexList indexes one list of the snapshot (its runs are base+i) and
// checks its runs.
func (v *validator) indexList(probs *problems, s *abi.SerialSnapshot, list string, runs []abi.Run, base int, active bool) {
	var last uint64
	for i := range runs {
		r := &runs[i]
		v.maxID = max(v.maxID, len(r.ID))
		v.idBytes += len(r.ID)
		if r.ID == "" {
			probs.add("%s[%d]: empty run id", list, i)
		} else if !v.insert(s, base+i, r.ID) {
			probs.add("%s[%d]: duplicate run id %s", list, i, qid(r.ID))
		}
		ok := r.State == abi.StateWaiting
		if active {
			ok = r.State.Active()
		}
		if !ok {
			probs.add("%s[%d] %s: state %s not allowed here", list, i, qid(r.ID), r.State)
		}
		if i > 0 && last >= r.Seq {
			probs.add("%s[%d] %s: seq %d not above the previous %d (lists are sorted by seq)", list, i, qid(r.ID), r.Seq, last)
		}
		last = r.Seq
	}
}

// checkSerial validates d against the indexed snapshot s; v.idx holds the
// run each action names (resolve). d may still alias guest memory: it
// reads lengths and kinds, and quotes at most maxQuotedID bytes of an id.
// One function on purpose: one loop over the actions checks each once
// against every rule (ABI.md "Validation"), in the order the messages list.
func (v *validator) checkSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) problems {
	var probs problems
	n := len(s.Active) + len(s.Waiting)
	if cap(v.seen) < n {
		v.seen = make([]int32, n)
	}
	v.seen = v.seen[:n]
	clear(v.seen)
	launches, stops := 0, 0
	if v.indexed && v.abi != 0 && v.abi < 3 {
		probs.add("the decision names its runs by index: needs ABI version 3 (the policy exports version %d)", v.abi)
	}
	if d.Wake != 0 && v.abi != 0 && v.abi < 4 {
		probs.add("a wake: needs ABI version 4 (the policy exports version %d)", v.abi)
	}
	if below := d.Below; below != 0 {
		switch {
		case v.abi == 1:
			probs.add("discard_below %d: needs ABI version 2 (the policy exports version 1)", below)
		case len(s.Waiting) == 0:
			probs.add("discard_below %d: the snapshot has no waiting runs", below)
		case below > s.Waiting[len(s.Waiting)-1].Seq+1:
			probs.add("discard_below %d: above the newest waiting run's seq %d plus 1 (it would cover runs submitted after the snapshot)",
				below, s.Waiting[len(s.Waiting)-1].Seq)
		}
		if len(d.BelowReason) > MaxReasonLen {
			probs.add("discard_below: reason of %d bytes exceeds %d", len(d.BelowReason), MaxReasonLen)
		}
	}
	for i := range d.Actions {
		a := &d.Actions[i]
		if len(a.Reason) > MaxReasonLen {
			probs.add("action %d: reason of %d bytes exceeds %d", i, len(a.Reason), MaxReasonLen)
		}
		switch a.Kind {
		case abi.ActionLaunch, abi.ActionDiscard, abi.ActionStop:
		default:
			probs.add("action %d on %s: unknown action kind %d", i, qid(a.Run), a.Kind)
			continue
		}
		j := int(v.idx[i])
		if j < 0 {
			if v.indexed {
				probs.add("action %d: %s of run index %d: no such run (the snapshot has %d)", i, a.Kind, v.refs[i], n)
			} else {
				probs.add("action %d: %s %s: unknown run (not in the snapshot)", i, a.Kind, qid(a.Run))
			}
			continue
		}
		r := v.run(s, j)
		if prev := v.seen[j]; prev != 0 {
			probs.add("action %d: %s %s: run already has action %d (%s)", i, a.Kind, qid(r.ID), prev-1, d.Actions[prev-1].Kind)
			continue
		}
		v.seen[j] = int32(i) + 1
		st := r.State
		switch a.Kind {
		case abi.ActionLaunch, abi.ActionDiscard:
			if st != abi.StateWaiting {
				probs.add("action %d: %s %s: run is %s, not WAITING", i, a.Kind, qid(r.ID), st)
			} else if a.Kind == abi.ActionLaunch {
				launches++
			}
		case abi.ActionStop:
			if st != abi.StateLaunched && st != abi.StateRunning {
				probs.add("action %d: stop %s: run is %s, not LAUNCHED or RUNNING", i, qid(r.ID), st)
			} else {
				stops++
			}
		}
	}
	if launches > 0 {
		running := 0 // active runs that keep a place after this decision
		for i := range s.Active {
			if s.Active[i].State != abi.StateStopping {
				running++
			}
		}
		running -= stops
		if max := int(s.EffectiveMaxActive()); running+launches > max {
			probs.add("launches %d run(s) with %d active run(s) left: exceeds max_active %d", launches, running, max)
		}
	}
	return probs
}

// ValidateSerial checks a decision against its snapshot: every action names
// a run of the snapshot, at most one action per run, launch and discard only
// WAITING runs, stop only LAUNCHED or RUNNING runs, known action kinds,
// reasons at most MaxReasonLen bytes, and the launches fit max_active
// (active runs not STOPPING and not stopped by d, plus launches); a
// discard_below (d.Below) needs waiting runs and covers none newer than the
// newest of the snapshot (it discards the runs below it that the actions
// leave WAITING). It returns
// nil or a *ValidationError listing every problem (errors.Is
// ErrInvalidDecision, or ErrInvalidSnapshot if s itself is malformed).
func ValidateSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) error {
	var v validator
	if probs := v.indexSerial(s); !probs.empty() {
		return probs.err(true)
	}
	v.resolve(s, d)
	if probs := v.checkSerial(s, d); !probs.empty() {
		return probs.err(false)
	}
	return nil
}

// validateReuse checks a slot-reuse decision: unless Fail, exactly one known
// verdict per task slot, and reuse only of slots the host verified (worker
// alive and slot held).
func validateReuse(r *abi.ReuseRequest, d *abi.ReuseDecision) error {
	var probs problems
	if len(d.Reason) > MaxReasonLen {
		probs.add("reason of %d bytes exceeds %d", len(d.Reason), MaxReasonLen)
	}
	if !d.Fail {
		if len(d.Verdicts) != len(r.Slots) {
			probs.add("%d verdicts for %d task slots", len(d.Verdicts), len(r.Slots))
		}
		for i := range min(len(d.Verdicts), len(r.Slots)) {
			t := &r.Slots[i]
			switch d.Verdicts[i] {
			case abi.VerdictReallocate:
			case abi.VerdictReuse:
				if !t.Verified() {
					probs.add("task %d: reuse of slot %s#%d not verified (alive=%t held=%t)", t.Task, qid(t.Worker), t.Index, t.Alive, t.Held)
				}
			default:
				probs.add("task %d: unknown verdict %d", t.Task, d.Verdicts[i])
			}
		}
	}
	if !probs.empty() {
		return probs.err(false)
	}
	return nil
}

// Problems splits a decide error into its validation problems (the
// decision came back but is invalid: ValidationError), or the one call
// error (trap, timeout, ...).
func Problems(err error) []string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		out := append([]string(nil), ve.Problems...)
		if ve.More > 0 {
			out = append(out, fmt.Sprintf("and %d more problem(s)", ve.More))
		}
		return out
	}
	return []string{err.Error()}
}
