package abi

import (
	"fmt"
)

// Version is the ABI version this package implements: a plugin built with
// it exports Version from wasmsched_abi_version. The host loads plugins of
// every version from MinVersion to Version and refuses any other value.
//
// Version 2 adds the window fields of SerialSnapshot (WaitingTotal,
// WaitingOldest, in bytes version 1 reserved) and SerialDecision.Below (a
// discard_below action): a version 1 plugin sees the same records and never
// sends the new action. Version 3 adds the indexed form of a serial
// decision (DecisionRunIndex: actions name runs by their snapshot index,
// not by id), which only a version 3 plugin may send. Version 4 lets a
// policy see time and keys (a run's labels, not_before and attempts; the
// group's parameters and its recent launches: a snapshot of its own tag)
// and ask to be decided again at a time (SerialDecision.Wake). Version 5
// adds placement to the allocation kind: each run's requirements and each
// worker's labels and groups in the snapshot, and a decision that may name
// the worker each run takes its slots on (AllocationDecision.Workers).
// Version 6 adds each run's weighted preferences (AllocRun.Prefer) to the
// allocation snapshot. ABI.md "Versions".
const (
	Version = 6
	// MinVersion is the oldest ABI version the host still loads.
	MinVersion = 1
)

// Kind is what a plugin decides.
type Kind uint32

const (
	// KindSerial plugins decide which waiting runs of a serial group to
	// launch or discard and which active runs to stop.
	KindSerial Kind = 1
	// KindSlotReuse plugins decide which recorded task slots a restored run
	// reuses after a leader failover.
	KindSlotReuse Kind = 2
	// KindAllocation plugins decide the order in which a namespace's
	// LAUNCHED runs receive slots (AllocationSnapshot).
	KindAllocation Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindSerial:
		return "serial"
	case KindSlotReuse:
		return "slot-reuse"
	case KindAllocation:
		return "allocation"
	}
	return fmt.Sprintf("Kind(%d)", uint32(k))
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindSerial || k == KindSlotReuse || k == KindAllocation }

// ParseKind parses "serial", "slot-reuse" or "allocation".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "serial":
		return KindSerial, nil
	case "slot-reuse":
		return KindSlotReuse, nil
	case "allocation":
		return KindAllocation, nil
	}
	return 0, fmt.Errorf("abi: unknown kind %q (want serial, slot-reuse or allocation)", s)
}

// State is the state of a run as seen by a policy. Only these four states
// appear in snapshots: terminal runs are never sent.
type State uint8

const (
	StateWaiting  State = 1
	StateLaunched State = 2
	StateRunning  State = 3
	StateStopping State = 4
)

var stateNames = [...]string{"", "WAITING", "LAUNCHED", "RUNNING", "STOPPING"}

func (s State) String() string {
	if s >= StateWaiting && s <= StateStopping {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Valid reports whether s is one of the four known states.
func (s State) Valid() bool { return s >= StateWaiting && s <= StateStopping }

// Active reports whether s is an active state (LAUNCHED, RUNNING or STOPPING).
func (s State) Active() bool { return s >= StateLaunched && s <= StateStopping }

// ParseState parses "WAITING", "LAUNCHED", "RUNNING" or "STOPPING".
func ParseState(s string) (State, error) {
	for i := StateWaiting; i <= StateStopping; i++ {
		if stateNames[i] == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("abi: unknown run state %q", s)
}

// Run is one run of a group as seen by a policy.
type Run struct {
	ID          string
	Seq         uint64
	State       State
	Priority    int32
	Slots       uint32
	SubmittedAt int64 // unix ms, 0 = unset
	StartedAt   int64 // unix ms, 0 = unset

	// ABI v4 (zero for a plugin of an older version):

	// Labels are the run's labels, sorted by key (at most MaxLabels).
	Labels []Label
	// NotBefore is when the run became due (unix ms; 0 = at once): a
	// delayed run, or a retry after its backoff. A policy never sees a run
	// before it is due.
	NotBefore int64
	// Attempt is the run's current attempt (1 before any retry; 0 from a
	// host that does not say), of MaxAttempts.
	Attempt, MaxAttempts uint32
}

// Label returns the value of the run's label key ("" if it has none).
func (r *Run) Label(key string) string { return LabelValue(r.Labels, key) }

// Label is one key=value pair: a run's label, or a group's policy
// parameter. Keys are 1 to MaxKeyLen bytes of [a-z0-9_.-]; values at most
// MaxValueLen bytes with no control character.
type Label struct {
	Key, Value string
}

// Bounds of labels and parameters (the host refuses more at submit and
// at group set; a snapshot never carries more).
const (
	MaxLabels   = 16  // labels per run
	MaxParams   = 32  // parameters per group
	MaxKeyLen   = 64  // bytes of a label key or parameter name
	MaxValueLen = 256 // bytes of a value
	// MaxLaunches is the most recent launches a v4 snapshot carries
	// (SerialSnapshot.Launches).
	MaxLaunches = 64
)

// LabelValue returns the value of key in labels ("" if absent).
func LabelValue(labels []Label, key string) string {
	for i := range labels {
		if labels[i].Key == key {
			return labels[i].Value
		}
	}
	return ""
}

// Launch is one recent launch of a group (ABI v4): when, and the labels of
// the run launched.
type Launch struct {
	At     int64 // unix ms
	Labels []Label
}

// SerialSnapshot is the input of a serial decision. Active and Waiting are
// each sorted by Seq ascending (oldest first).
//
// Waiting is a window of the group's WAITING runs: all of them when
// WaitingTotal is at most len(Waiting), else the oldest WaitingOldest runs
// followed by the newest len(Waiting)-WaitingOldest (see Truncated). The
// host sizes the window so that each part holds at least max_active runs.
type SerialSnapshot struct {
	Group     string
	Policy    string
	MaxActive uint32 // 0 is read as 1, see EffectiveMaxActive
	Now       int64  // unix ms
	Active    []Run  // LAUNCHED, RUNNING, STOPPING
	Waiting   []Run  // WAITING: the window

	// WaitingTotal is the number of WAITING runs in the group (ABI v2; 0
	// from a host that does not say: then Waiting is all of them).
	WaitingTotal uint32
	// WaitingOldest is how many leading runs of Waiting are the group's
	// oldest (ABI v2); it matters only when the window is truncated.
	WaitingOldest uint32

	// Params are the group's policy parameters, sorted by name (ABI v4;
	// `group set --param`): one built module serves every group however
	// it is tuned.
	Params []Label
	// Launches are the group's most recent launches, oldest first (ABI
	// v4; at most MaxLaunches, whichever policy decided them): a policy
	// throttles or rate-limits with them, keeping no state of its own.
	Launches []Launch
}

// Param returns the value of the group's parameter name ("" if unset).
func (s *SerialSnapshot) Param(name string) string { return LabelValue(s.Params, name) }

// Truncated reports whether the group has WAITING runs that are not in
// Waiting: they are newer than Waiting[WaitingOldest-1] and older than
// Waiting[WaitingOldest].
func (s *SerialSnapshot) Truncated() bool { return int(s.WaitingTotal) > len(s.Waiting) }

// EffectiveMaxActive returns MaxActive, or 1 when it is 0.
func (s *SerialSnapshot) EffectiveMaxActive() uint32 {
	if s.MaxActive == 0 {
		return 1
	}
	return s.MaxActive
}

// ActionKind is what a serial decision does to one run.
type ActionKind uint8

const (
	ActionLaunch  ActionKind = 1
	ActionDiscard ActionKind = 2
	ActionStop    ActionKind = 3
	// ActionDiscardBelow is the wire kind of SerialDecision.Below (ABI v2):
	// it never appears in SerialDecision.Actions.
	ActionDiscardBelow ActionKind = 4
	// ActionWake is the wire kind of SerialDecision.Wake (ABI v4): it
	// never appears in SerialDecision.Actions.
	ActionWake ActionKind = 5
)

func (a ActionKind) String() string {
	switch a {
	case ActionLaunch:
		return "launch"
	case ActionDiscard:
		return "discard"
	case ActionStop:
		return "stop"
	case ActionDiscardBelow:
		return "discard_below"
	case ActionWake:
		return "wake"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(a))
}

// ParseActionKind parses "launch", "discard" or "stop".
func ParseActionKind(s string) (ActionKind, error) {
	switch s {
	case "launch":
		return ActionLaunch, nil
	case "discard":
		return ActionDiscard, nil
	case "stop":
		return ActionStop, nil
	}
	return 0, fmt.Errorf("abi: unknown action %q", s)
}

// Action names one run and what to do with it.
type Action struct {
	Kind   ActionKind
	Run    string
	Reason string
}

// SerialDecision is the output of a serial decision. An empty decision means
// "nothing to do".
type SerialDecision struct {
	Actions []Action

	// Below, when nonzero, discards every WAITING run of the group whose
	// seq is below it, in the window or not (ABI v2; see DiscardBelow).
	Below       uint64
	BelowReason string

	// Wake, when nonzero, asks the host to decide the group again at this
	// time (unix ms) even if nothing else changes (ABI v4; see WakeAt).
	Wake int64
}

// Reset empties d, keeping its capacity.
func (d *SerialDecision) Reset() {
	d.Actions = d.Actions[:0]
	d.Below, d.BelowReason = 0, ""
	d.Wake = 0
}

// WakeAt asks to be decided again at unix ms t (ABI v4): the earliest of
// several calls counts. The host keeps one durable wake per group (the
// earliest asked; it fires on a new leader after a failover), no earlier
// than MinWakeInterval after the decision and no later than MaxWakeAhead:
// a wake in the past fires as soon as that allows, a far one is moved in
// (the policy asks again then). A wake does not make a decision non-empty
// for the dirty contract: the group settles, and is asked again at the
// wake or at the next change, whichever comes first.
func (d *SerialDecision) WakeAt(t int64) {
	if t != 0 && (d.Wake == 0 || t < d.Wake) {
		d.Wake = t
	}
}

// Bounds of a wake (SerialDecision.WakeAt), in ms from the decision.
const (
	MinWakeInterval = 100
	MaxWakeAhead    = 24 * 3600 * 1000
)

// DiscardBelow discards, with one reason, every WAITING run with a seq
// below seq that d's actions leave WAITING, including those beyond the
// snapshot's window (ABI v2): a decision may launch the oldest runs and
// discard the rest with one action. The host applies it in bounded chunks
// and never launches a run it covers. seq may be at most the newest
// waiting run's seq plus 1 (runs submitted after the snapshot are never
// covered). A second call replaces the first.
func (d *SerialDecision) DiscardBelow(seq uint64, reason string) {
	d.Below, d.BelowReason = seq, reason
}

// Empty reports whether d does nothing to a run (a wake alone is empty).
func (d *SerialDecision) Empty() bool { return len(d.Actions) == 0 && d.Below == 0 }

// Launch, Discard and Stop append an action.
func (d *SerialDecision) Launch(run, reason string) { d.Add(ActionLaunch, run, reason) }

func (d *SerialDecision) Discard(run, reason string) { d.Add(ActionDiscard, run, reason) }

func (d *SerialDecision) Stop(run, reason string) { d.Add(ActionStop, run, reason) }

// Add appends an action of kind k. It writes the fields in place: in a Go
// wasm guest, append of a composite literal builds the Action in a zeroed
// temporary (memory.fill) and copies it with write barriers (memory.copy
// through the runtime), both calls out of the compiled code that cost more
// than the rest of a small decision loop.
func (d *SerialDecision) Add(k ActionKind, run, reason string) {
	n := len(d.Actions)
	if n == cap(d.Actions) {
		d.Actions = append(d.Actions, Action{})
	} else {
		d.Actions = d.Actions[:n+1]
	}
	a := &d.Actions[n]
	a.Kind, a.Run, a.Reason = k, run, reason
}

// TaskSlot is one recorded task slot of a restored run and what the host
// verified about it.
type TaskSlot struct {
	Task   uint32
	Worker string
	Index  uint32
	Token  string
	Alive  bool // the worker's heartbeat is current
	Held   bool // the slot still carries this run's token
}

// Verified reports whether the host verified the slot (alive and held).
func (t *TaskSlot) Verified() bool { return t.Alive && t.Held }

// ReuseRequest is the input of a slot-reuse decision.
type ReuseRequest struct {
	Group string
	Now   int64
	Run   Run
	Slots []TaskSlot
}

// Verdict is the decision for one task slot.
type Verdict uint8

const (
	VerdictReuse      Verdict = 1
	VerdictReallocate Verdict = 2
)

func (v Verdict) String() string {
	switch v {
	case VerdictReuse:
		return "reuse"
	case VerdictReallocate:
		return "reallocate"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// ReuseDecision is the output of a slot-reuse decision: either Fail (the
// whole run fails, Verdicts ignored) or one verdict per task slot, in order.
type ReuseDecision struct {
	Fail     bool
	Reason   string
	Verdicts []Verdict
}

// Reset empties d, keeping its capacity.
func (d *ReuseDecision) Reset() {
	d.Fail = false
	d.Reason = ""
	d.Verdicts = d.Verdicts[:0]
}
