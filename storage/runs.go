package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/digest"
)

// State is a run state.
type State string

// Run states. WAITING -> LAUNCHED -> RUNNING -> SUCCEEDED|FAILED|STOPPED;
// WAITING -> DISCARDED; LAUNCHED|RUNNING -> STOPPING -> STOPPED.
const (
	StateWaiting   State = "WAITING"
	StateLaunched  State = "LAUNCHED"
	StateRunning   State = "RUNNING"
	StateStopping  State = "STOPPING"
	StateSucceeded State = "SUCCEEDED"
	StateFailed    State = "FAILED"
	StateStopped   State = "STOPPED"
	StateDiscarded State = "DISCARDED"
)

// Final reports whether no further transition is possible.
func (s State) Final() bool {
	switch s {
	case StateSucceeded, StateFailed, StateStopped, StateDiscarded:
		return true
	}
	return false
}

// Active reports whether the run counts against max_active (LAUNCHED, RUNNING, STOPPING).
func (s State) Active() bool {
	return s == StateLaunched || s == StateRunning || s == StateStopping
}

// Group is a serial group.
type Group struct {
	Name      string
	Policy    string // policy name; default "wait"
	MaxActive int
	Window    int // waiting runs per side of a snapshot's window; 0 = DefaultWindow
	// Retention is how long the group's finished runs are kept: -1 = the
	// namespace default (the leader's EngineConfig.Retention), 0 = forever.
	Retention time.Duration
	Version   int64 // bumped on every change of the group's runs or settings
	// Gen is the group's incarnation (Keys.GroupGen): a group deleted and
	// made again under its name is another gen (0: made before gens).
	Gen     int64
	Waiting int // number of WAITING runs (in a Snapshot: not covered by DiscardBelow)
	Active  int // number of LAUNCHED/RUNNING/STOPPING runs
	// DiscardBelow: WAITING runs with a smaller seq are discarded by a
	// decision's discard_below and being drained (read by Snapshot only).
	DiscardBelow int64
	// Delayed is the number of WAITING runs not due yet (a not_before
	// ahead or a retry's backoff): they are not in Waiting.
	Delayed int
	// RunTimeout and Retry are the defaults of the runs submitted to the
	// group that do not set their own (0: none).
	RunTimeout time.Duration
	Retry      Retry
	// Paused: the leader asks no policy and launches nothing (PauseGroup);
	// PausedAt and PausedBy say when and who.
	Paused   bool
	PausedAt time.Time
	PausedBy string
	// Params are the settings of the group's policy, sorted by name (at
	// most abi.MaxParams; GroupSettings.Params): its policy sees them.
	Params []abi.Label
	// WakeAt is when the group's policy asked to be decided again (zero:
	// no pending wake).
	WakeAt time.Time
}

// Bounds of a group's settings and of what one decision reads.
const (
	// DefaultWindow is the number of oldest and of newest WAITING runs a
	// snapshot holds when a group has more than twice as many (each part
	// is at least max_active); Group.Window overrides it per group.
	DefaultWindow = 16
	// MaxWindow bounds Group.Window and MaxMaxActive bounds max_active, so
	// that a snapshot holds at most 2·MaxWindow waiting runs.
	MaxWindow    = 10_000
	MaxMaxActive = 10_000
	// DrainChunk is the number of covered runs one drain script discards.
	DrainChunk = 256
	// DecisionsKept is how many of its latest decisions a group keeps
	// (GroupDecisions).
	DecisionsKept = 20
)

// SubmitRequest describes a new run.
type SubmitRequest struct {
	Group    string
	ID       string // "" = generated
	Slots    int    // 0 = 1; < 0 is ErrInvalid
	Priority int
	Payload  string
	Duration time.Duration
	// IdempotencyKey (optional, at most MaxIdempotencyKey bytes): a second
	// submit with the same key within IdempotencyTTL returns the first
	// one's run (while it exists) instead of submitting another.
	IdempotencyKey string
	// NotBefore (zero = none): the run is not launched before it (Redis
	// time); it waits outside its group's queue until then. A time at or
	// before now is now; at most MaxNotBefore ahead.
	NotBefore time.Time
	// Timeout (0 = the group's run timeout, if any; else none): the worker
	// stops an attempt after it (FAILED "timed out after D"); 1ms..MaxTimeout.
	Timeout time.Duration
	// Retry (zero = the group's): how often and how soon a FAILED attempt
	// is tried again.
	Retry Retry
	// Labels (at most abi.MaxLabels, see ValidLabel; any order, each key
	// once) are the run's keys: policies see them (ABI v4), RunFilter.Label
	// selects by one.
	Labels []abi.Label
}

// Retry is a run's retry policy: up to MaxAttempts attempts; attempt n+1
// is due min(Cap, Base·2^(n-1)) after attempt n failed, half of that
// fixed and half random (equal jitter). A STOPPED or DISCARDED run is
// never retried.
type Retry struct {
	MaxAttempts int           // 1..MaxAttempts (1: no retry); 0 = the group's, else 1
	Base, Cap   time.Duration // 0 = the group's, else DefaultRetryBase, DefaultRetryCap
}

// Bounds and defaults of runs in time.
const (
	MaxNotBefore     = 366 * 24 * time.Hour
	MaxTimeout       = 30 * 24 * time.Hour
	MaxAttempts      = 100
	DefaultRetryBase = time.Second
	DefaultRetryCap  = 10 * time.Minute
	MaxRetryCap      = 7 * 24 * time.Hour
	// AttemptsKept is how many attempts a run records (the latest).
	AttemptsKept = 20
)

// TimedOutReason is the reason of an attempt stopped at its timeout d.
func TimedOutReason(d time.Duration) string { return "timed out after " + d.String() }

// validate checks r (op names the caller); a zero Retry is valid.
func (r Retry) validate(op, what string) error {
	switch {
	case r.MaxAttempts < 0 || r.MaxAttempts > MaxAttempts:
		return invalid(op, "%s: max attempts %d outside 1..%d", what, r.MaxAttempts, MaxAttempts)
	case r.Base < 0 || (r.Base > 0 && r.Base < time.Millisecond) || r.Base > MaxRetryCap:
		return invalid(op, "%s: retry backoff %v outside 1ms..%v", what, r.Base, MaxRetryCap)
	case r.Cap < 0 || (r.Cap > 0 && r.Cap < time.Millisecond) || r.Cap > MaxRetryCap:
		return invalid(op, "%s: retry backoff cap %v outside 1ms..%v", what, r.Cap, MaxRetryCap)
	case r.Cap > 0 && r.Base > r.Cap:
		return invalid(op, "%s: retry backoff %v is above its cap %v", what, r.Base, r.Cap)
	}
	return nil
}

// backoff is the run hash's "base_ms,cap_ms" ("" = the group's or the
// default; a cap alone keeps the default base, below the cap).
func (r Retry) backoff() string {
	if r.Base == 0 && r.Cap == 0 {
		return ""
	}
	b, c := r.Base, r.Cap
	if b == 0 {
		b = min(DefaultRetryBase, c)
	}
	if c == 0 {
		c = max(DefaultRetryCap, b)
	}
	return fmt.Sprintf("%d,%d", b.Milliseconds(), c.Milliseconds())
}

func validTimeout(op, what string, d time.Duration) error {
	if d < 0 || (d > 0 && d < time.Millisecond) || d > MaxTimeout {
		return invalid(op, "%s: timeout %v outside 1ms..%v", what, d, MaxTimeout)
	}
	return nil
}

// Attempt is one attempt of a run with retries (Run.Attempts).
type Attempt struct {
	N                     int
	Worker                string
	StartedAt, FinishedAt time.Time
	Outcome               State // SUCCEEDED, FAILED or STOPPED
	Reason                string
}

// parseAttempts parses a run's attempts field (attempt_log in _lib.lua).
func parseAttempts(v string) []Attempt {
	if v == "" {
		return nil
	}
	var out []Attempt
	for _, e := range strings.Split(v, "\x1e") {
		p := strings.SplitN(e, "\x1f", 6)
		if len(p) < 6 {
			continue
		}
		n, _ := strconv.Atoi(p[0])
		st, _ := strconv.ParseInt(p[2], 10, 64)
		fin, _ := strconv.ParseInt(p[3], 10, 64)
		out = append(out, Attempt{N: n, Worker: p[1], StartedAt: msTime(st), FinishedAt: msTime(fin), Outcome: State(p[4]), Reason: p[5]})
	}
	return out
}

// Idempotency bounds.
const (
	IdempotencyTTL    = 24 * time.Hour
	MaxIdempotencyKey = 256
)

// Bounds of what a client stores with a run: a payload is handed to the
// worker as is (pass a reference, not the data); a stop reason is shown
// with the run.
const (
	MaxPayload    = 64 << 10
	MaxStopReason = 1024
)

// MaxRunSlots bounds the task slots one run may ask for: a run that asks
// more is refused at submit (ErrInvalid), never launched to wait for
// slots no namespace of workers this engine is built for has together.
const MaxRunSlots = 1024

// Assignment is one task slot of a run: (worker, slot index, token), task 0..k-1.
type Assignment struct {
	Worker string
	Slot   int
	Token  string
	Task   int
}

// Run is a run record.
type Run struct {
	ID, Group                                      string
	Seq                                            int64
	State                                          State
	Slots, Priority                                int
	Payload                                        string
	Duration                                       time.Duration
	Policy, PolicyVersion                          string       // of the decision that launched it (Decision: the last that moved it)
	Decision                                       *RunDecision // nil: no decision moved it (waiting, or a client's stop)
	SubmittedAt, LaunchedAt, StartedAt, FinishedAt time.Time
	Reason                                         string
	Assignments                                    []Assignment // set at allocation, by task
	// NotBefore: not launched before it (zero: none); a WAITING run with
	// NotBefore ahead is not due yet (a delay, or a retry's backoff).
	NotBefore time.Time
	Timeout   time.Duration // per attempt; 0 = none
	// Attempt is the current attempt (1 before any retry), of MaxAttempts.
	Attempt, MaxAttempts int
	RetryBase, RetryCap  time.Duration // with MaxAttempts > 1
	// Attempts are its finished attempts, oldest first (the last
	// AttemptsKept), recorded when MaxAttempts > 1.
	Attempts []Attempt
	// Schedule is the schedule that submitted it ("" = a client).
	Schedule string
	// What its last finished attempt produced: a handler's result, the
	// tail of a program's output, its exit code (nil: none).
	Result, Output string
	ExitCode       *int
	// Labels are the run's labels, sorted by key (SubmitRequest.Labels).
	Labels []abi.Label
}

// runFields is the order of run fields returned by scripts and HMGET.
// The decision record is one field, dec (apply.lua); runs decided before
// it existed carry it in the fields decision..decision_policy_version.
var runFields = []string{"id", "group", "seq", "state", "slots", "priority", "payload", "duration_ms",
	"policy", "policy_version", "submitted_at", "launched_at", "started_at", "finished_at", "reason", "assign",
	"decision", "decision_epoch", "decided_at", "decision_action", "decision_reason", "policy_sha256", "policy_registry",
	"decision_policy", "decision_policy_version", "dec",
	"not_before", "timeout_ms", "attempt", "max_attempts", "backoff", "attempts", "schedule",
	"result", "output", "exit_code", "labels"}

// RunDecision is the record of the decision that launched, discarded or
// stopped a run.
type RunDecision struct {
	ID             string // the decision's claim id, epoch:group:version
	Epoch          int64  // the leader's term
	At             time.Time
	Action         ActionKind
	Reason         string // the policy's
	Policy         string
	PolicyVersion  string // sha256 prefix
	PolicySHA256   string
	PolicyRegistry int // the registry version; 0 = the built-in
}

func runFieldArgs() []any {
	a := make([]any, len(runFields))
	for i, f := range runFields {
		a[i] = f
	}
	return a
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// parseRun builds a Run from values in runFields order; ok false if absent.
func parseRun(vals []any) (Run, bool) {
	if len(vals) < len(runFields) || vals[0] == nil {
		return Run{}, false
	}
	atoi := func(i int) int { n, _ := strconv.Atoi(str(vals[i])); return n }
	r := Run{
		ID: str(vals[0]), Group: str(vals[1]), Seq: toInt64(vals[2]), State: State(str(vals[3])),
		Slots: atoi(4), Priority: atoi(5), Payload: str(vals[6]),
		Duration: time.Duration(toInt64(vals[7])) * time.Millisecond,
		Policy:   str(vals[8]), PolicyVersion: str(vals[9]),
		SubmittedAt: msTime(toInt64(vals[10])), LaunchedAt: msTime(toInt64(vals[11])),
		StartedAt: msTime(toInt64(vals[12])), FinishedAt: msTime(toInt64(vals[13])),
		Reason: str(vals[14]), Assignments: parseAssign(str(vals[15])),
		Decision: parseRunDecision(vals),
	}
	parseRunTime(&r, vals[26:])
	return r, true
}

// parseRunTime fills r's time fields from not_before, timeout_ms,
// attempt, max_attempts, backoff, attempts.
func parseRunTime(r *Run, vals []any) {
	if len(vals) < 6 {
		return
	}
	r.NotBefore = msTime(toInt64(vals[0]))
	r.Timeout = time.Duration(toInt64(vals[1])) * time.Millisecond
	r.Attempt, r.MaxAttempts = max(int(toInt64(vals[2])), 1), max(int(toInt64(vals[3])), 1)
	_, retry := groupRunDefaults(nil, nil, vals[4])
	r.RetryBase, r.RetryCap = retry.Base, retry.Cap
	r.Attempts = parseAttempts(str(vals[5]))
	if len(vals) > 9 {
		r.Schedule, r.Result, r.Output = str(vals[6]), str(vals[7]), str(vals[8])
		if vals[9] != nil {
			n := int(toInt64(vals[9]))
			r.ExitCode = &n
		}
	}
	if len(vals) > 10 {
		r.Labels = decodeLabels(str(vals[10]))
	}
}

func parseRunDecision(vals []any) *RunDecision {
	if len(vals) >= 26 && vals[25] != nil {
		return parseDecision(str(vals[25]))
	}
	if len(vals) < 25 || vals[16] == nil {
		return nil
	}
	return &RunDecision{ID: str(vals[16]), Epoch: toInt64(vals[17]), At: msTime(toInt64(vals[18])),
		Action: ActionKind(str(vals[19])), Reason: str(vals[20]), Policy: str(vals[23]), PolicyVersion: str(vals[24]),
		PolicySHA256: str(vals[21]), PolicyRegistry: int(toInt64(vals[22]))}
}

// parseDecision parses a run's dec field: claim, epoch, decided_at (ms),
// action, policy, policy version, sha256, registry version, reason,
// 0x1f-separated (the reason last: it may contain anything).
func parseDecision(v string) *RunDecision {
	p := strings.SplitN(v, "\x1f", 9)
	if len(p) < 9 {
		return nil
	}
	epoch, _ := strconv.ParseInt(p[1], 10, 64)
	at, _ := strconv.ParseInt(p[2], 10, 64)
	reg, _ := strconv.Atoi(p[7])
	return &RunDecision{ID: p[0], Epoch: epoch, At: msTime(at), Action: ActionKind(p[3]), Policy: p[4],
		PolicyVersion: p[5], PolicySHA256: p[6], PolicyRegistry: reg, Reason: p[8]}
}

// parseAssign parses "worker#index#token#task,..." (worker may contain '#').
func parseAssign(s string) []Assignment {
	if s == "" {
		return nil
	}
	var out []Assignment
	for _, e := range strings.Split(s, ",") {
		p := strings.Split(e, "#")
		if len(p) < 4 {
			continue
		}
		n := len(p)
		slot, _ := strconv.Atoi(p[n-3])
		task, _ := strconv.Atoi(p[n-1])
		out = append(out, Assignment{Worker: strings.Join(p[:n-3], "#"), Slot: slot, Token: p[n-2], Task: task})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}

// flatAssign parses a script's flat {worker, index, token, task, ...} reply.
func flatAssign(v any) []Assignment {
	a, _ := v.([]any)
	var out []Assignment
	for i := 0; i+3 < len(a); i += 4 {
		slot, _ := strconv.Atoi(str(a[i+1]))
		task, _ := strconv.Atoi(str(a[i+3]))
		out = append(out, Assignment{Worker: str(a[i]), Slot: slot, Token: str(a[i+2]), Task: task})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// SetGroup creates or updates a group, changing only what is given:
// policy "" and maxActive 0 keep the group's current value ("wait" and 1
// for a new group); a negative maxActive is ErrInvalid. Bumps the version
// and marks the group dirty.
func (s *Store) SetGroup(ctx context.Context, name, policy string, maxActive int) (Group, error) {
	return s.SetGroupSettings(ctx, name, GroupSettings{Policy: policy, MaxActive: maxActive})
}

// GroupSettings are the settings SetGroupSettings changes: a zero field
// keeps the group's current value (a new group's defaults: policy "wait",
// max_active 1, window DefaultWindow).
type GroupSettings struct {
	Policy    string
	MaxActive int // 1..MaxMaxActive
	Window    int // 1..MaxWindow
	// Retention (nil = keep) is how long finished runs are kept: 0 =
	// forever, RetentionDefault = the namespace default, else > 0 (whole
	// milliseconds).
	Retention *time.Duration
	// RunTimeout (nil = keep; 0 = none) is the timeout of the runs
	// submitted without one.
	RunTimeout *time.Duration
	// Retry (nil = keep; a zero Retry = none) is the retry policy of the
	// runs submitted without one.
	Retry *Retry
	// Params change the settings of the group's policy (ABI v4; valid as
	// labels are, see ValidLabel): with ReplaceParams they become exactly
	// Params, else each one given is set and one with an empty value
	// removed. Nil (and not ReplaceParams) keeps them. At most
	// abi.MaxParams after the change. A new policy keeps them.
	Params        []abi.Label
	ReplaceParams bool
}

// RetentionDefault, as GroupSettings.Retention, returns a group to the
// namespace's default retention.
const RetentionDefault time.Duration = -1

// SetGroupSettings creates or updates a group: only the nonzero settings
// change. It bumps the version and marks the group dirty.
func (s *Store) SetGroupSettings(ctx context.Context, name string, gs GroupSettings) (Group, error) {
	const op = "set group"
	if err := ValidateName("group", name); err != nil {
		return Group{}, err
	}
	if gs.Policy != "" {
		if err := ValidateName("policy", gs.Policy); err != nil {
			return Group{}, err
		}
	}
	if gs.MaxActive < 0 || gs.MaxActive > MaxMaxActive {
		return Group{}, invalid(op, "group %s: max_active %d is outside 1 to %d", name, gs.MaxActive, MaxMaxActive)
	}
	if gs.Window < 0 || gs.Window > MaxWindow {
		return Group{}, invalid(op, "group %s: window %d is outside 1 to %d", name, gs.Window, MaxWindow)
	}
	ret := ""
	if r := gs.Retention; r != nil {
		switch {
		case *r == RetentionDefault:
			ret = "-1"
		case *r < 0:
			return Group{}, invalid(op, "group %s: retention %v is negative", name, *r)
		case *r > 0 && *r < time.Millisecond:
			return Group{}, invalid(op, "group %s: retention %v is below 1ms", name, *r)
		default:
			ret = strconv.FormatInt(r.Milliseconds(), 10)
		}
	}
	timeout, maxa, backoff := "", "", ""
	if d := gs.RunTimeout; d != nil {
		if err := validTimeout(op, "group "+name, *d); err != nil {
			return Group{}, err
		}
		timeout = strconv.FormatInt(d.Milliseconds(), 10)
	}
	if r := gs.Retry; r != nil {
		if err := r.validate(op, "group "+name); err != nil {
			return Group{}, err
		}
		maxa, backoff = strconv.Itoa(r.MaxAttempts), r.backoff()
		if backoff == "" {
			backoff = "-"
		}
	}
	mode := ""
	switch {
	case gs.ReplaceParams:
		mode = "replace"
	case gs.Params != nil:
		mode = "merge"
	}
	args := []any{name, gs.Policy, gs.MaxActive, gs.Window, ret, s.k.WorkEvents(), timeout, maxa, backoff, mode, abi.MaxParams}
	if mode != "" {
		if len(gs.Params) > abi.MaxParams {
			return Group{}, invalid(op, "group %s: %d policy parameters, at most %d", name, len(gs.Params), abi.MaxParams)
		}
		seen := map[string]bool{}
		for _, p := range gs.Params {
			if err := ValidLabel(p.Key, p.Value); err != nil {
				return Group{}, invalid(op, "group %s: parameter %s", name, strings.TrimPrefix(err.Error(), "label "))
			}
			if seen[p.Key] {
				return Group{}, invalid(op, "group %s: parameter %s given twice", name, p.Key)
			}
			seen[p.Key] = true
			args = append(args, p.Key, p.Value)
		}
	}
	k := s.k
	v, err := s.run(ctx, op, "set_group", []string{k.Groups(), k.Group(name), k.Dirty(), k.Waiting(name), k.Active(name), k.GroupGen(), k.Retire(),
		k.Delayed(name)}, args...)
	if err != nil {
		return Group{}, err
	}
	a := v.([]any)
	for len(a) < 12 {
		a = append(a, nil)
	}
	g := Group{Name: name, Policy: str(a[0]), MaxActive: int(toInt64(a[1])), Version: toInt64(a[2]),
		Waiting: int(toInt64(a[3])), Active: int(toInt64(a[4])), Window: int(toInt64(a[5])), Retention: retention(a[6]),
		Delayed: int(toInt64(a[10])), Params: decodeLabels(str(a[11]))}
	g.RunTimeout, g.Retry = groupRunDefaults(a[7], a[8], a[9])
	return g, nil
}

// PauseGroup pauses group name: the leader asks its policy nothing and
// launches nothing until ResumeGroup (a decision made before is stale);
// submits are accepted and its active runs go on. who is recorded.
// ErrNotFound for an unknown group.
func (s *Store) PauseGroup(ctx context.Context, name, who string) error {
	return s.groupControl(ctx, "pause", name, who)
}

// ResumeGroup resumes a paused group: it is decided again at once.
func (s *Store) ResumeGroup(ctx context.Context, name string) error {
	return s.groupControl(ctx, "resume", name, "")
}

func (s *Store) groupControl(ctx context.Context, op, name, who string) error {
	if err := ValidateName("group", name); err != nil {
		return err
	}
	if len(who) > MaxStopReason {
		return invalid(op+" group", "who is %d bytes, at most %d", len(who), MaxStopReason)
	}
	k := s.k
	_, err := s.run(ctx, op+" group", "group_control", []string{k.Group(name), k.Dirty()}, op, name, who, k.WorkEvents())
	return err
}

// groupRunDefaults parses a group's run_timeout_ms, max_attempts and
// backoff fields.
func groupRunDefaults(timeout, maxa, backoff any) (time.Duration, Retry) {
	r := Retry{MaxAttempts: int(toInt64(maxa))}
	if b, c, ok := strings.Cut(str(backoff), ","); ok {
		bn, _ := strconv.ParseInt(b, 10, 64)
		cn, _ := strconv.ParseInt(c, 10, 64)
		r.Base, r.Cap = time.Duration(bn)*time.Millisecond, time.Duration(cn)*time.Millisecond
	}
	return time.Duration(toInt64(timeout)) * time.Millisecond, r
}

// deleteChunk bounds the waiting runs one delete_group call discards (one
// script of 100 stays under a millisecond of Redis time).
const deleteChunk = 100

// DeleteGroup deletes group name. A group with active runs is refused
// (ErrBadState), and so is one with waiting runs unless force, which
// discards them first (oldest first, deleteChunk per script call, each
// with reason) and reports how many. Finished runs keep their records.
// ErrNotFound for an unknown group. A submit to the name afterwards creates
// a new group with the defaults.
func (s *Store) DeleteGroup(ctx context.Context, name string, force bool, reason string) (discarded int, err error) {
	f := "0"
	if force {
		f = "1"
	}
	return s.discardLoop(ctx, "delete group", name, f, reason)
}

// DiscardWaiting discards every WAITING run of group name (the delayed
// ones too), oldest first, deleteChunk per script, each with reason, and
// reports how many; active runs go on. ErrNotFound for an unknown group.
//
// With labels, only the waiting runs carrying every one of them are
// discarded: the queue is read deleteChunk at a time (its due runs, then
// the delayed ones), each chunk's labels read in one pipeline, and the
// matching runs of the chunk discarded by one script; a run submitted
// while it goes may be left.
func (s *Store) DiscardWaiting(ctx context.Context, name, reason string, labels ...abi.Label) (int, error) {
	if len(labels) == 0 {
		return s.discardLoop(ctx, "discard waiting", name, "2", reason)
	}
	const op = "discard waiting"
	if err := ValidateName("group", name); err != nil {
		return 0, err
	}
	if len(reason) > MaxStopReason {
		return 0, invalid(op, "reason is %d bytes, at most %d", len(reason), MaxStopReason)
	}
	ls, err := NormalizeLabels("labels", labels, abi.MaxLabels)
	if err != nil {
		return 0, invalid(op, "%v", err)
	}
	k := s.k
	if _, err := s.GetGroup(ctx, name); err != nil {
		return 0, err
	}
	discarded := 0
	for _, zset := range []string{k.Waiting(name), k.Delayed(name)} {
		for skip := int64(0); ; {
			ids, err := s.c.ZRange(ctx, zset, skip, skip+deleteChunk-1).Result()
			if err != nil {
				return discarded, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
			if len(ids) == 0 {
				break
			}
			match, err := s.matchLabels(ctx, ids, ls)
			if err != nil {
				return discarded, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
			skip += int64(len(ids) - len(match)) // the others stay: read past them
			if len(match) == 0 {
				continue
			}
			keys := []string{k.Groups(), k.Group(name), k.Waiting(name), k.Active(name), k.Dirty(), k.WaitInfo(name), k.Finished(name), k.Retire(),
				k.Delayed(name), k.Timers(), k.Launches(name)}
			args := []any{name, "2", reason, k.RunEvents()}
			for _, id := range match {
				keys = append(keys, k.Run(id))
				args = append(args, id)
			}
			v, err := s.run(ctx, op, "delete_group", keys, args...)
			if err != nil {
				return discarded, err
			}
			n := int(toInt64(v.([]any)[2]))
			discarded += n
			skip += int64(len(match) - n) // matched but not discarded (left the queue meanwhile)
		}
	}
	return discarded, nil
}

// matchLabels returns the ids whose runs carry every label of ls (their
// labels read in one pipeline).
func (s *Store) matchLabels(ctx context.Context, ids []string, ls []abi.Label) ([]string, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.k.Run(id), "labels")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	f := RunFilter{Labels: ls}
	var out []string
	for i, id := range ids {
		r := Run{Labels: decodeLabels(cmds[i].Val())}
		if f.match(&r) {
			out = append(out, id)
		}
	}
	return out, nil
}

// discardLoop calls delete_group until it is done: mode "0" delete, "1"
// discard then delete, "2" discard only.
func (s *Store) discardLoop(ctx context.Context, op, name, mode, reason string) (discarded int, err error) {
	if err := ValidateName("group", name); err != nil {
		return 0, err
	}
	if len(reason) > MaxStopReason {
		return 0, invalid(op, "reason is %d bytes, at most %d", len(reason), MaxStopReason)
	}
	k := s.k
	for {
		keys := []string{k.Groups(), k.Group(name), k.Waiting(name), k.Active(name), k.Dirty(), k.WaitInfo(name), k.Finished(name), k.Retire(),
			k.Delayed(name), k.Timers(), k.Launches(name)}
		args := []any{name, mode, reason, k.RunEvents()}
		var ids []string
		if mode != "0" {
			if ids, err = s.c.ZRange(ctx, k.Waiting(name), 0, deleteChunk-1).Result(); err == nil && len(ids) == 0 {
				ids, err = s.c.ZRange(ctx, k.Delayed(name), 0, deleteChunk-1).Result()
			}
			if err != nil {
				return discarded, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
		}
		for _, id := range ids {
			keys = append(keys, k.Run(id))
			args = append(args, id)
		}
		v, err := s.run(ctx, op, "delete_group", keys, args...)
		if err != nil {
			return discarded, err
		}
		a := v.([]any)
		left := int(toInt64(a[1]))
		discarded += int(toInt64(a[2]))
		if toInt64(a[0]) == 1 || (mode == "2" && len(ids) == 0) {
			return discarded, nil
		}
		if len(ids) == 0 && left > 0 {
			return discarded, fmt.Errorf("storage: %s %s: %d waiting runs not discarded", op, name, left)
		}
	}
}

// StopActive asks every active run of group name to stop (RequestStop,
// pipelined deleteChunk at a time) with reason and reports how many it
// asked; a run that ended meanwhile is skipped. With labels, only the
// active runs carrying every one of them.
func (s *Store) StopActive(ctx context.Context, name, reason string, labels ...abi.Label) (int, error) {
	const op = "stop active"
	if err := ValidateName("group", name); err != nil {
		return 0, err
	}
	if len(reason) > MaxStopReason {
		return 0, invalid(op, "reason is %d bytes, at most %d", len(reason), MaxStopReason)
	}
	k := s.k
	ids, err := s.c.ZRange(ctx, k.Active(name), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("storage: %s %s: %w", op, name, err)
	}
	if len(ids) == 0 {
		// nothing to stop: say so of a group that does not exist, as
		// discard, pause, resume and drain do (ErrNotFound)
		if _, err := s.GetGroup(ctx, name); errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("storage: %s: group %s does not exist: %w", op, name, ErrNotFound)
		} else if err != nil {
			return 0, err
		}
	}
	if len(labels) > 0 {
		ls, err := NormalizeLabels("labels", labels, abi.MaxLabels)
		if err != nil {
			return 0, invalid(op, "%v", err)
		}
		var match []string
		for lo := 0; lo < len(ids); lo += deleteChunk {
			m, err := s.matchLabels(ctx, ids[lo:min(lo+deleteChunk, len(ids))], ls)
			if err != nil {
				return 0, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
			match = append(match, m...)
		}
		ids = match
	}
	n := 0
	for lo := 0; lo < len(ids); lo += deleteChunk {
		var calls []scriptCall
		for _, id := range ids[lo:min(lo+deleteChunk, len(ids))] {
			calls = append(calls, scriptCall{
				keys: []string{k.Run(id), k.Group(name), k.Waiting(name), k.Active(name), k.Launched(), k.Dirty(), k.Finished(name),
					k.WaitInfo(name), k.Retire(), k.Delayed(name), k.LaunchInfo()},
				args: []any{id, name, reason, k.RunEvents(), k.SlotEventsPrefix(), k.WorkEvents()}})
		}
		_, errs := s.runPipe(ctx, op, "request_stop", calls)
		for _, e := range errs {
			switch {
			case e == nil:
				n++
			case errors.Is(e, ErrBadState), errors.Is(e, ErrNotFound): // ended meanwhile
			default:
				return n, e
			}
		}
	}
	return n, nil
}

// GetGroup reads a group (ErrNotFound if absent).
func (s *Store) GetGroup(ctx context.Context, name string) (Group, error) {
	if err := ValidateName("group", name); err != nil {
		return Group{}, err
	}
	gs, err := s.getGroups(ctx, []string{name})
	if err != nil {
		return Group{}, err
	}
	if len(gs) == 0 {
		return Group{}, fmt.Errorf("storage: get group: group %s: %w", name, ErrNotFound)
	}
	return gs[0], nil
}

// ListGroups lists all groups by name.
func (s *Store) ListGroups(ctx context.Context) ([]Group, error) {
	names, err := s.c.SMembers(ctx, s.k.Groups()).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: list groups: %w", err)
	}
	sort.Strings(names)
	return s.getGroups(ctx, names)
}

func (s *Store) getGroups(ctx context.Context, names []string) ([]Group, error) {
	if len(names) == 0 {
		return nil, nil
	}
	type cmds struct {
		h       *redis.SliceCmd
		w, a, d *redis.IntCmd
	}
	cs := make([]cmds, len(names))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cs[i] = cmds{p.HMGet(ctx, s.k.Group(n), "policy", "max_active", "version", "window", "retention_ms",
				"run_timeout_ms", "max_attempts", "backoff", "paused", "paused_at", "paused_by", "params", "wake_at"),
				p.ZCard(ctx, s.k.Waiting(n)), p.ZCard(ctx, s.k.Active(n)), p.ZCard(ctx, s.k.Delayed(n))}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: read groups: %w", err)
	}
	var out []Group
	for i, n := range names {
		v := cs[i].h.Val()
		if v[0] == nil {
			continue
		}
		g := Group{Name: n, Policy: str(v[0]), MaxActive: int(toInt64(v[1])), Version: toInt64(v[2]),
			Window: int(toInt64(v[3])), Retention: retention(v[4]), Waiting: int(cs[i].w.Val()), Active: int(cs[i].a.Val()),
			Delayed: int(cs[i].d.Val())}
		g.RunTimeout, g.Retry = groupRunDefaults(v[5], v[6], v[7])
		g.Paused, g.PausedAt, g.PausedBy = str(v[8]) == "1", msTime(toInt64(v[9])), str(v[10])
		g.Params, g.WakeAt = decodeLabels(str(v[11])), msTime(toInt64(v[12]))
		out = append(out, g)
	}
	return out, nil
}

// DirtyGroups returns up to limit (<= 0: all) groups that may need a
// decision, read from the dirty set (no scan of all groups).
func (s *Store) DirtyGroups(ctx context.Context, limit int) ([]string, error) {
	var (
		out []string
		err error
	)
	if limit <= 0 {
		out, err = s.c.SMembers(ctx, s.k.Dirty()).Result()
	} else {
		out, err = s.c.SRandMemberN(ctx, s.k.Dirty(), int64(limit)).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("storage: dirty groups: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// DirtyAndGeneration is DirtyGroups(limit) and PolicyGeneration in ONE
// pipelined round trip: what a coordinator pass starts with.
func (s *Store) DirtyAndGeneration(ctx context.Context, limit int) (groups []string, gen int64, err error) {
	var dirty *redis.StringSliceCmd
	var g *redis.StringCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		g = p.Get(ctx, s.k.PolicyGen())
		if limit <= 0 {
			dirty = p.SMembers(ctx, s.k.Dirty())
		} else {
			dirty = p.SRandMemberN(ctx, s.k.Dirty(), int64(limit))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, 0, fmt.Errorf("storage: dirty groups: %w", err)
	}
	if gen, err = g.Int64(); err == redis.Nil {
		gen = 0
	} else if err != nil {
		return nil, 0, fmt.Errorf("storage: policy generation: %w", err)
	}
	groups = dirty.Val()
	sort.Strings(groups)
	return groups, gen, nil
}

// Submit adds a WAITING run (namespace-wide seq), bumps the group version and
// marks it dirty. An unknown group is created with policy "wait" and
// max_active 1. An existing ID is ErrDuplicate; a go-redis retry of the same
// call is recognised by its op id and returns the run.
func (s *Store) Submit(ctx context.Context, r SubmitRequest) (Run, error) {
	run, _, err := s.SubmitReplay(ctx, r)
	return run, err
}

// SubmitReplay is Submit that also says whether the run was there
// already: replayed by the same call's retry, or named by r.IdempotencyKey
// (then the run is the stored one, read back whole).
func (s *Store) SubmitReplay(ctx context.Context, r SubmitRequest) (Run, bool, error) {
	r, c, err := s.submitCall(r)
	if err == nil {
		err = s.checkRunSlots(ctx, r)
	}
	if err != nil {
		return Run{}, false, err
	}
	cs, _ := packCalls(s.submitShared, []scriptCall{c}, 1, nil, 0)
	v, err := s.run(ctx, "submit", "submit", cs[0].keys, cs[0].args...)
	if err == nil {
		var vs []any
		var es []error
		vs, es = callResults("submit", []int{1}, []any{v}, []error{nil})
		v, err = vs[0], es[0]
	}
	if err != nil {
		return Run{}, false, err
	}
	run := submittedRun(r, v)
	if a, _ := v.([]any); len(a) >= 3 && toInt64(a[2]) == 1 && r.IdempotencyKey != "" {
		got, err := s.GetRun(ctx, run.ID)
		if err != nil {
			return Run{}, false, err
		}
		return got, true, nil
	}
	a, _ := v.([]any)
	return run, len(a) >= 3 && toInt64(a[2]) == 1, nil
}

func (s *Store) submitCall(r SubmitRequest) (SubmitRequest, scriptCall, error) {
	const op = "submit"
	if err := ValidateName("group", r.Group); err != nil {
		return r, scriptCall{}, err
	}
	explicitID := r.ID != ""
	if !explicitID {
		r.ID = newID("r-")
	}
	// what the checks below call the run: its id when the caller named it
	// (a generated one was never created: an error must not name it)
	name := "run " + r.ID
	if !explicitID {
		name = "the run"
	}
	if err := ValidateName("run", r.ID); err != nil {
		return r, scriptCall{}, err
	}
	if r.Slots < 0 {
		return r, scriptCall{}, invalid(op, "%s: slots %d is negative", name, r.Slots)
	}
	if r.Slots > MaxRunSlots {
		return r, scriptCall{}, invalid(op, "%s: slots %d: at most %d (storage.MaxRunSlots)", name, r.Slots, MaxRunSlots)
	}
	if r.Slots == 0 {
		r.Slots = 1
	}
	if r.Duration < 0 {
		return r, scriptCall{}, invalid(op, "%s: duration %v is negative", name, r.Duration)
	}
	if r.Priority < math.MinInt32 || r.Priority > math.MaxInt32 {
		return r, scriptCall{}, invalid(op, "%s: priority %d outside %d..%d (a policy reads it as a 32-bit integer)", name, r.Priority, math.MinInt32, math.MaxInt32)
	}
	if len(r.Payload) > MaxPayload {
		return r, scriptCall{}, invalid(op, "%s: payload is %d bytes, at most %d (pass a reference to the data)", name, len(r.Payload), MaxPayload)
	}
	if len(r.IdempotencyKey) > MaxIdempotencyKey {
		return r, scriptCall{}, invalid(op, "idempotency key is %d bytes, at most %d", len(r.IdempotencyKey), MaxIdempotencyKey)
	}
	var nb int64
	if !r.NotBefore.IsZero() {
		if time.Until(r.NotBefore) > MaxNotBefore {
			return r, scriptCall{}, invalid(op, "%s: not_before %s is more than %v ahead", name, r.NotBefore.UTC().Format(time.RFC3339), MaxNotBefore)
		}
		nb = max(r.NotBefore.UnixMilli(), 0)
	}
	if r.Timeout != 0 {
		if err := validTimeout(op, name, r.Timeout); err != nil {
			return r, scriptCall{}, err
		}
	}
	if err := r.Retry.validate(op, name); err != nil {
		return r, scriptCall{}, err
	}
	labels, err := NormalizeLabels("labels", r.Labels, abi.MaxLabels)
	if err != nil {
		return r, scriptCall{}, invalid(op, "%s: %v", name, err)
	}
	r.Labels = labels
	timeout, maxa := "", ""
	if r.Timeout > 0 {
		timeout = strconv.FormatInt(r.Timeout.Milliseconds(), 10)
	}
	if r.Retry.MaxAttempts > 0 {
		maxa = strconv.Itoa(r.Retry.MaxAttempts)
	}
	k := s.k
	idem := "0"
	if r.IdempotencyKey != "" {
		idem = "1"
	}
	c := scriptCall{
		keys: []string{k.Group(r.Group), k.Waiting(r.Group), k.WaitInfo(r.Group), k.Delayed(r.Group), k.Run(r.ID)},
		args: []any{idem, r.Group, r.ID, r.Slots, r.Priority, r.Payload, r.Duration.Milliseconds(), newID("op-"),
			nb, timeout, maxa, r.Retry.backoff(), encodeLabels(labels)},
	}
	if r.IdempotencyKey != "" {
		c.keys = append(c.keys, k.Idempotency(digest.SHA256([]byte(r.IdempotencyKey))))
		explicit := "0"
		if explicitID {
			explicit = "1"
		}
		c.args = append(c.args, IdempotencyTTL.Milliseconds(), r.fingerprint(), explicit)
	}
	return r, c, nil
}

// submitShared is what every run of a submit call shares: its first keys
// and args (submit.lua's header).
func (s *Store) submitShared() scriptCall {
	k := s.k
	return scriptCall{
		keys: []string{k.Seq(), k.Groups(), k.Dirty(), k.Runs(), k.GroupGen(), k.Timers()},
		args: []any{k.WorkEvents(), k.RunEvents(), Retry{Base: DefaultRetryBase, Cap: DefaultRetryCap}.backoff(), k.RunPrefix()},
	}
}

// submitRunsPerCall bounds the runs one submit call carries (the clock and
// the call's messages are paid once: issue 23).
const submitRunsPerCall = 64

// packCalls packs parts, in order, into calls of one script: each call is
// head() (its shared keys and args) followed by its parts' keys and args,
// at most perCall parts and, with weights, parts weighing at most
// maxWeight together (a heavier part goes alone). It returns the calls and
// how many parts each carries (callResults spreads their replies).
func packCalls(head func() scriptCall, parts []scriptCall, perCall int, weights []int, maxWeight int) ([]scriptCall, []int) {
	var calls []scriptCall
	var n []int
	w := 0
	for i, p := range parts {
		pw := 0
		if weights != nil {
			pw = weights[i]
		}
		if len(n) == 0 || n[len(n)-1] == perCall || (maxWeight > 0 && w > 0 && w+pw > maxWeight) {
			calls, n, w = append(calls, head()), append(n, 0), 0
		}
		c := &calls[len(calls)-1]
		c.keys = append(c.keys, p.keys...)
		c.args = append(c.args, p.args...)
		n[len(n)-1]++
		w += pw
	}
	return calls, n
}

// errNotReached is a part's result when its call stopped before it (a
// snapshot call's read budget): send it again.
var errNotReached = errors.New("storage: not reached by its call")

// callResults spreads the results of calls of n[j] parts each (a call's
// error is each of its parts'; a part's error reply is mapped by
// scriptErr with op).
func callResults(op string, n []int, vals []any, errs []error) ([]any, []error) {
	var ov []any
	var oe []error
	for j, cnt := range n {
		rs, _ := vals[j].([]any)
		for m := range cnt {
			switch {
			case errs[j] != nil:
				ov, oe = append(ov, nil), append(oe, errs[j])
			case m >= len(rs):
				ov, oe = append(ov, nil), append(oe, errNotReached)
			default:
				if e, ok := rs[m].(error); ok {
					ov, oe = append(ov, nil), append(oe, scriptErr(op, e))
					continue
				}
				ov, oe = append(ov, rs[m]), append(oe, nil)
			}
		}
	}
	return ov, oe
}

// fingerprint names what a request asks for (not its run id: submit.lua
// compares a chosen id itself), so a reused idempotency key is recognised
// as the same request or refused (ErrConflict) as another one.
func (r SubmitRequest) fingerprint() string {
	return digest.Short(digest.SHA256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%s\x00%d\x00%d\x00%d\x00%s\x00%s",
		r.Group, r.Slots, r.Priority, r.Duration.Milliseconds(), r.Payload,
		r.NotBefore.UnixMilli(), r.Timeout.Milliseconds(), r.Retry.MaxAttempts, r.Retry.backoff(), encodeLabels(r.Labels))))
}

func submittedRun(r SubmitRequest, v any) Run {
	a, _ := v.([]any)
	for len(a) < 7 {
		a = append(a, nil)
	}
	if id, ok := a[3].(string); ok && id != "" {
		r.ID = id
	}
	run := Run{ID: r.ID, Group: r.Group, Seq: toInt64(a[0]), State: StateWaiting, Slots: r.Slots,
		Priority: r.Priority, Payload: r.Payload, Duration: r.Duration.Truncate(time.Millisecond),
		SubmittedAt: msTime(toInt64(a[1])), Timeout: time.Duration(toInt64(a[5])) * time.Millisecond,
		Attempt: 1, MaxAttempts: max(int(toInt64(a[6])), 1), Labels: r.Labels}
	if toInt64(a[4]) == 0 && toInt64(a[2]) == 0 {
		run.NotBefore = time.UnixMilli(r.NotBefore.UnixMilli())
	}
	return run
}

// SubmitResult is one run of a SubmitBatch.
type SubmitResult struct {
	Run Run
	Err error
}

// SubmitBatch is Submit for many runs (same checks, same replay rule):
// submit calls of up to submitRunsPerCall runs each, all sent in ONE
// pipelined round trip, in order (seqs follow the order). Errors are per
// run (ErrDuplicate, ErrInvalid, ErrConflict), never for the batch.
func (s *Store) SubmitBatch(ctx context.Context, reqs []SubmitRequest) []SubmitResult {
	out := make([]SubmitResult, len(reqs))
	filled := make([]SubmitRequest, len(reqs)) // with defaults (generated id, slots 1)
	calls := make([]scriptCall, 0, len(reqs))
	pos := make([]int, 0, len(reqs))
	for i, r := range reqs {
		r, c, err := s.submitCall(r)
		if err == nil {
			err = s.checkRunSlots(ctx, r)
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		filled[i] = r
		calls = append(calls, c)
		pos = append(pos, i)
	}
	calls, n := packCalls(s.submitShared, calls, submitRunsPerCall, nil, 0)
	vals, errs := s.runPipe(ctx, "submit", "submit", calls)
	vals, errs = callResults("submit", n, vals, errs)
	for j, i := range pos {
		if errs[j] != nil {
			out[i].Err = errs[j]
			continue
		}
		out[i].Run = submittedRun(filled[i], vals[j])
	}
	return out
}

// GetRun reads a run (ErrNotFound if absent).
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	if err := ValidateName("run", id); err != nil {
		return Run{}, err
	}
	v, err := s.c.HMGet(ctx, s.k.Run(id), runFields...).Result()
	if err != nil {
		return Run{}, fmt.Errorf("storage: get run %s: %w", id, err)
	}
	r, ok := parseRun(v)
	if !ok {
		return Run{}, fmt.Errorf("storage: get run: run %s: %w", id, ErrNotFound)
	}
	return r, nil
}

// GetRuns reads the runs ids in ONE pipelined round trip, in order; an
// absent run is left out. At most MaxGetRuns ids per call (ErrInvalid).
func (s *Store) GetRuns(ctx context.Context, ids []string) ([]Run, error) {
	if len(ids) > MaxGetRuns {
		return nil, invalid("get runs", "%d ids, at most %d per call", len(ids), MaxGetRuns)
	}
	for _, id := range ids {
		if err := ValidateName("run", id); err != nil {
			return nil, err
		}
	}
	return s.getRuns(ctx, ids)
}

// MaxGetRuns bounds the ids of one GetRuns call.
const MaxGetRuns = 10_000

// RunFilter selects runs for ListRuns; zero fields match everything.
type RunFilter struct {
	Group string
	State State
	Limit int   // <= 0: 1000
	Below int64 // > 0: only runs with a smaller seq (the next page after a run of seq Below)
	// Labels: only runs carrying every one of them (key and value).
	Labels []abi.Label
}

// match reports whether r passes f's group, state and labels.
func (f RunFilter) match(r *Run) bool {
	if (f.Group != "" && r.Group != f.Group) || (f.State != "" && r.State != f.State) {
		return false
	}
	for _, l := range f.Labels {
		if !slices.Contains(r.Labels, l) {
			return false
		}
	}
	return true
}

// ListRuns lists runs, newest first (by seq), filtered.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	p, err := s.ListRunsPage(ctx, f)
	return p.Runs, err
}

// RunPage is one page of ListRunsPage.
type RunPage struct {
	Runs []Run
	// Next is the seq to pass as RunFilter.Below for the next page; 0
	// when no older run exists (filtered or not).
	Next int64
}

// ListRunsPage lists up to f.Limit runs, newest first, with seq below
// f.Below, and where the next page starts. It reads the runs index in
// pages of 500 (and each page's run records in one pipeline) until Limit
// runs match or the index ends.
func (s *Store) ListRunsPage(ctx context.Context, f RunFilter) (RunPage, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	if f.Below < 0 {
		return RunPage{}, invalid("list runs", "below %d is negative", f.Below)
	}
	top := "+inf"
	if f.Below > 0 {
		top = "(" + strconv.FormatInt(f.Below, 10)
	}
	var out RunPage
	const page = 500
	var last int64
	for offset := int64(0); len(out.Runs) < f.Limit; offset += page {
		zs, err := s.c.ZRevRangeByScoreWithScores(ctx, s.k.Runs(), &redis.ZRangeBy{Max: top, Min: "-inf", Offset: offset, Count: page}).Result()
		if err != nil {
			return RunPage{}, fmt.Errorf("storage: list runs: %w", err)
		}
		if len(zs) == 0 {
			last = 0
			break
		}
		ids := make([]string, len(zs))
		for i, z := range zs {
			ids[i], _ = z.Member.(string)
		}
		runs, err := s.getRuns(ctx, ids)
		if err != nil {
			return RunPage{}, err
		}
		last = int64(zs[len(zs)-1].Score)
		for _, r := range runs {
			if f.match(&r) {
				out.Runs = append(out.Runs, r)
				if len(out.Runs) == f.Limit {
					last = r.Seq
					break
				}
			}
		}
		if len(zs) < page {
			if len(out.Runs) < f.Limit {
				last = 0 // the index ended
			}
			break
		}
	}
	if last > 0 {
		n, err := s.c.ZCount(ctx, s.k.Runs(), "-inf", "("+strconv.FormatInt(last, 10)).Result()
		if err != nil {
			return RunPage{}, fmt.Errorf("storage: list runs: %w", err)
		}
		if n > 0 {
			out.Next = last
		}
	}
	return out, nil
}

func (s *Store) getRuns(ctx context.Context, ids []string) ([]Run, error) {
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.k.Run(id), runFields...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: read runs: %w", err)
	}
	out := make([]Run, 0, len(ids))
	for _, c := range cmds {
		if r, ok := parseRun(c.Val()); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Snapshot is a group's state for a decision, read in one script.
type Snapshot struct {
	Group           Group
	Now             time.Time // Redis TIME
	Active, Waiting []Run     // ordered by seq; Waiting is the window
	// WaitingTotal is the number of WAITING runs not covered by the
	// group's discard_below; Waiting holds all of them when it is at most
	// twice the window, else the oldest WaitingOldest then the newest.
	WaitingTotal  int
	WaitingOldest int
	// Launches are the group's latest launches, oldest first (at most
	// abi.MaxLaunches; Keys.Launches).
	Launches []abi.Launch
}

// viewArg is apply.lua's view argument: '1' (the leader keeps the view:
// dv is written), '1,lo,hi,oldest,newest' for a view with a gap (dv
// records it), else '0'.
func viewArg(d Decision) string {
	switch {
	case !d.View:
		return "0"
	case d.Gap == (ViewGap{}):
		return "1"
	}
	return fmt.Sprintf("1,%d,%d,%d,%d", d.Gap.Lo, d.Gap.Hi, d.Gap.Oldest, d.Gap.Newest)
}

// Truncated reports whether the group has WAITING runs beyond the window.
func (sn Snapshot) Truncated() bool { return sn.WaitingTotal > len(sn.Waiting) }

// Snapshot reads a group, its active runs and a window of its waiting runs
// (at most 2·max(window, max_active) of them: snapshot.lua) in ONE round
// trip.
func (s *Store) Snapshot(ctx context.Context, group string) (Snapshot, error) {
	if err := ValidateName("group", group); err != nil {
		return Snapshot{}, err
	}
	c := s.snapshotCall(group, false, runFieldArgs())
	v, err := s.run(ctx, "snapshot", "snapshot", c.keys, c.args...)
	if err == nil {
		vs, es := callResults("snapshot", []int{1}, []any{v}, []error{nil})
		v, err = vs[0], es[0]
	}
	if err != nil {
		return Snapshot{}, err
	}
	return parseSnapshot(group, v, parseRun, false), nil
}

// snapshotGroupsPerCall bounds the groups one snapshot call reads (the
// clock and the call are paid once; 16 windows of 32 runs hold Redis well
// under a millisecond); snapshot.lua also stops a call after the group
// that took its reads past 2,048 runs (big windows), and SnapshotBatch
// sends the rest again.
const snapshotGroupsPerCall = 16

// DecisionFields are the run fields SnapshotBatch reads: the ones a policy
// sees (abi.Run: id, seq, state, priority, slots, submitted_at, started_at,
// attempt, max_attempts, not_before, labels).
var DecisionFields = []string{"id", "seq", "state", "priority", "slots", "submitted_at", "started_at",
	"attempt", "max_attempts", "not_before", "labels"}

var decisionFieldArgs = func() []any {
	a := make([]any, len(DecisionFields))
	for i, f := range DecisionFields {
		a[i] = f
	}
	return a
}()

// parseDecisionRun builds a Run from values in DecisionFields order (only
// those fields set); ok false if absent.
func parseDecisionRun(vals []any) (Run, bool) {
	if len(vals) < len(DecisionFields) || vals[0] == nil {
		return Run{}, false
	}
	atoi := func(i int) int { n, _ := strconv.Atoi(str(vals[i])); return n }
	return Run{ID: str(vals[0]), Seq: toInt64(vals[1]), State: State(str(vals[2])), Priority: atoi(3), Slots: atoi(4),
		SubmittedAt: msTime(toInt64(vals[5])), StartedAt: msTime(toInt64(vals[6])),
		Attempt: max(atoi(7), 1), MaxAttempts: max(atoi(8), 1), NotBefore: msTime(toInt64(vals[9])),
		Labels: decodeLabels(str(vals[10]))}, true
}

// snapshotCall: indexed reads the waiting runs from the group's WaitInfo
// (DecisionFields only), else each run's fields.
func (s *Store) snapshotCall(group string, indexed bool, fields []any) scriptCall {
	k := s.k
	args := make([]any, 0, 4+len(fields))
	mode := "0"
	if indexed {
		mode = "1"
	}
	args = append(args, k.RunPrefix(), DefaultWindow, mode, abi.MaxLaunches)
	args = append(args, fields...)
	return scriptCall{keys: []string{k.Group(group), k.Waiting(group), k.Active(group), k.WaitInfo(group), k.Launches(group)}, args: args}
}

// parseWaitInfo builds a WAITING run from its WaitInfo entry
// "seq,priority,slots,submitted_ms[,attempt,max_attempts,not_before_ms,labels]"
// (winfo in _lib.lua); ok false if malformed.
func parseWaitInfo(id, v string) (Run, bool) {
	var f [7]int64
	n := 4 // fields; 7 when the entry goes on (then v ends as the labels)
	for i := 0; i < n; i++ {
		x, rest, _ := strings.Cut(v, ",")
		x2, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return Run{}, false
		}
		f[i], v = x2, rest
		if i == 3 && v != "" {
			n = 7
		}
	}
	r := Run{ID: id, Seq: f[0], State: StateWaiting, Priority: int(f[1]), Slots: int(f[2]), SubmittedAt: msTime(f[3]),
		Attempt: 1, MaxAttempts: 1}
	if n == 7 {
		r.Attempt, r.MaxAttempts, r.NotBefore = max(int(f[4]), 1), max(int(f[5]), 1), msTime(f[6])
		r.Labels = decodeLabels(v)
	}
	return r, true
}

// parseLaunch reads a launches list entry "launched_ms,labels".
func parseLaunch(v string) (abi.Launch, bool) {
	ms, labels, _ := strings.Cut(v, ",")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return abi.Launch{}, false
	}
	return abi.Launch{At: n, Labels: decodeLabels(labels)}, true
}

func parseSnapshot(group string, v any, parse func([]any) (Run, bool), indexed bool) Snapshot {
	a, _ := v.([]any)
	if len(a) < 6 {
		return Snapshot{Group: Group{Name: group}}
	}
	g, _ := a[0].([]any)
	for len(g) < 9 {
		g = append(g, nil)
	}
	runs := func(x any) []Run {
		xs, _ := x.([]any)
		out := make([]Run, 0, len(xs))
		for _, e := range xs {
			ev, _ := e.([]any)
			if r, ok := parse(ev); ok {
				out = append(out, r)
			}
		}
		return out
	}
	sn := Snapshot{Now: msTime(toInt64(a[1])), Active: runs(a[2]),
		WaitingTotal: int(toInt64(a[4])), WaitingOldest: int(toInt64(a[5]))}
	if indexed {
		w, _ := a[3].([]any)
		for len(w) < 2 {
			w = append(w, nil)
		}
		ids, _ := w[0].([]any)
		info, _ := w[1].([]any)
		sn.Waiting = make([]Run, 0, len(ids))
		for i, id := range ids {
			if i < len(info) {
				if r, ok := parseWaitInfo(str(id), str(info[i])); ok {
					sn.Waiting = append(sn.Waiting, r)
				}
			}
		}
	} else {
		sn.Waiting = runs(a[3])
	}
	sn.Group = Group{Name: group, Policy: str(g[0]), MaxActive: int(toInt64(g[1])), Version: toInt64(g[2]),
		Window: int(toInt64(g[3])), DiscardBelow: toInt64(g[4]), Gen: toInt64(g[5]), Waiting: sn.WaitingTotal, Active: len(sn.Active),
		Paused: str(g[6]) == "1", Params: decodeLabels(str(g[7])), WakeAt: msTime(toInt64(g[8]))}
	if len(a) > 6 {
		ls, _ := a[6].([]any)
		for i := len(ls) - 1; i >= 0; i-- { // stored newest first
			if l, ok := parseLaunch(str(ls[i])); ok {
				sn.Launches = append(sn.Launches, l)
			}
		}
	}
	return sn
}

// SnapshotResult is one group of a SnapshotBatch.
type SnapshotResult struct {
	Snapshot Snapshot
	Err      error
}

// SnapshotBatch reads the snapshots of groups, all sent in ONE pipelined
// round trip of snapshot calls of up to snapshotGroupsPerCall groups each
// (the coordinator's pass).
// Runs carry only DecisionFields (what a policy sees; no payload, assign,
// policy...). Results are in order; errors are per group (ErrNotFound,
// ErrInvalid), never for the batch.
func (s *Store) SnapshotBatch(ctx context.Context, groups []string) []SnapshotResult {
	out := make([]SnapshotResult, len(groups))
	var parts []scriptCall
	var pos []int
	var args []any
	for i, g := range groups {
		if err := ValidateName("group", g); err != nil {
			out[i].Err = err
			continue
		}
		c := s.snapshotCall(g, true, decisionFieldArgs)
		args = c.args // the same for every group: the call's head
		parts = append(parts, scriptCall{keys: c.keys})
		pos = append(pos, i)
	}
	head := func() scriptCall { return scriptCall{args: args} }
	// A call stops after the group that took it past its read budget
	// (snapshot.lua): the groups it did not reach go again, the first of
	// each call is always read.
	for len(parts) > 0 {
		calls, n := packCalls(head, parts, snapshotGroupsPerCall, nil, 0)
		vals, errs := s.runPipe(ctx, "snapshot", "snapshot", calls)
		vals, errs = callResults("snapshot", n, vals, errs)
		var again []scriptCall
		var againPos []int
		for j, i := range pos {
			switch {
			case errors.Is(errs[j], errNotReached):
				again, againPos = append(again, parts[j]), append(againPos, i)
			case errs[j] != nil:
				out[i].Err = errs[j]
			default:
				out[i].Snapshot = parseSnapshot(groups[i], vals[j], parseDecisionRun, true)
			}
		}
		parts, pos = again, againPos
	}
	return out
}

// ActionKind is the kind of a decision action.
type ActionKind string

// Action kinds.
const (
	ActionLaunch  ActionKind = "launch"
	ActionDiscard ActionKind = "discard"
	ActionStop    ActionKind = "stop"
)

// Action is one decision on one run.
type Action struct {
	Kind   ActionKind
	Run    string
	Reason string
}

// Decision is a policy's decision for one group snapshot.
type Decision struct {
	Version       int64  // the snapshot's group version
	ClaimID       string // unique per decision; "" = none (no replay detection)
	Policy        string // recorded on launched runs
	PolicyVersion string
	Actions       []Action
	// Below (> 0) discards every WAITING run with a smaller seq that the
	// actions leave WAITING, with BelowReason: the apply raises the
	// group's discard_below, the runs leave every snapshot at once and the
	// leader drains them in chunks (Drain).
	Below       int64
	BelowReason string
	// PolicySHA256 and PolicyRegistry (0 = the built-in) complete the
	// record of the policy version on every run the decision names.
	PolicySHA256   string
	PolicyRegistry int
	// Again keeps the group dirty after a non-empty apply: set when the
	// snapshot's window was truncated, so the group is decided again on
	// its next window.
	Again bool
	// WakeAt (unix ms; 0 = none) asks to decide the group again then (ABI
	// v4): the apply holds it to abi.MinWakeInterval..abi.MaxWakeAhead from
	// Redis time and keeps the group's earliest pending wake; the leader's
	// timer fires it (DueBatch), durable across leaders. An empty decision
	// with a wake still settles the group.
	WakeAt int64
	// History records the decision's launches in the group's launch
	// history (Keys.Launches), which its snapshots then carry: set for a
	// policy that reads them (ABI v4, not a built-in). A decision without
	// it drops the history.
	History bool
	// View says the leader keeps the view this decision leaves (the
	// snapshot less what the decision takes): the apply records the
	// version it leaves (the group's dv), and a report that is the only
	// change after it hands back a reference instead of the snapshot
	// (ParseWorkRef). Without it dv is cleared.
	View bool
	// Gap is, for a View of a truncated window, what the view lacks of
	// the next window (LeaveView): the apply records it with dv, and the
	// report's reference carries those runs (WorkRef.Gap).
	Gap ViewGap
	// NoPlace leaves every launch LAUNCHED for the slot manager (the
	// leader sets it while it knows a LAUNCHED run waits for slots); by
	// default a launch takes its slots at once when they are free and no
	// LAUNCHED run waits for slots (the script checks the queue itself, so
	// no launch overtakes a queued run, whatever the leader knew).
	NoPlace bool
}

// Apply applies d to group in one fenced script, all-or-nothing, and
// returns the group's version afterwards. Errors: ErrFenced, ErrDuplicate
// (d.ClaimID already applied; checked before the version), ErrStale,
// ErrNotFound, ErrBadState, ErrInvalid. Zero actions settles the group
// (removes it from dirty if still at d.Version; no bump).
func (s *Store) Apply(ctx context.Context, f Fence, group string, d Decision) (int64, error) {
	r := s.ApplyBatch(ctx, f, []GroupDecision{{Group: group, Decision: d}})[0]
	return r.Version, r.Err
}

func parseApply(v any) ApplyResult {
	a, _ := v.([]any)
	for len(a) < 2 {
		a = append(a, nil)
	}
	return ApplyResult{Version: toInt64(a[0]), Queued: int(toInt64(a[1]))}
}

// applyGroupsPerCall bounds the groups one apply call carries: the fence,
// the clock and the free-slot cursor are paid once per call (issue 23:
// ~10 µs of Redis time a group), while a call of 16 groups still holds
// Redis well under a millisecond.
const applyGroupsPerCall = 16

// applyActionsPerCall bounds the actions one apply call carries (a group
// with a big window may decide thousands of runs at once: such a decision
// goes in a call of its own, as before batching).
const applyActionsPerCall = 512

// applyShared is what every group of an apply call shares: its first keys
// and args (apply.lua's header).
func (s *Store) applyShared(f Fence) ([]string, []any) {
	k := s.k
	keys := []string{k.Fence(), k.Lock(), k.Dirty(), k.Launched(), k.Drain(), k.Workers(), k.Slots(), k.Free(), k.Tokens(),
		k.Retire(), k.Timers(), k.LaunchInfo()}
	args := append(f.args(), DecisionsKept, k.RunEvents(), k.SlotEventsPrefix(), k.WorkEvents(), abi.MinWakeInterval, abi.MaxWakeAhead)
	return keys, args
}

// applyPart is one group's share of an apply call (its keys and args).
func (s *Store) applyPart(group string, d Decision) (scriptCall, error) {
	const op = "apply"
	if err := ValidateName("group", group); err != nil {
		return scriptCall{}, err
	}
	k := s.k
	if d.Below < 0 {
		return scriptCall{}, invalid(op, "discard_below %d is negative", d.Below)
	}
	keys := make([]string, 0, 7+len(d.Actions))
	keys = append(keys, k.Group(group), k.Waiting(group), k.Active(group), k.Finished(group), k.Decisions(group),
		k.WaitInfo(group), k.Launches(group))
	args := make([]any, 0, 15+3*len(d.Actions))
	hist := 0
	if d.History {
		hist = abi.MaxLaunches
	}
	again := 0
	if d.Again {
		again = 1
	}
	place := "1"
	if d.NoPlace {
		place = "0"
	}
	args = append(args, len(d.Actions), group, d.Version, d.ClaimID, d.Policy, d.PolicyVersion, d.Below, d.BelowReason, again,
		d.PolicySHA256, d.PolicyRegistry, place, max(d.WakeAt, 0), hist, viewArg(d))
	for _, a := range d.Actions {
		if err := ValidateName("run", a.Run); err != nil {
			return scriptCall{}, fmt.Errorf("storage: %s: %w", op, err)
		}
		switch a.Kind {
		case ActionLaunch, ActionDiscard, ActionStop:
		default:
			return scriptCall{}, invalid(op, "unknown action kind %q on run %s", a.Kind, a.Run)
		}
		keys = append(keys, k.Run(a.Run))
		args = append(args, string(a.Kind), a.Run, a.Reason)
	}
	return scriptCall{keys: keys, args: args}, nil
}

// GroupDecision is one group's decision in an ApplyBatch.
type GroupDecision struct {
	Group    string
	Decision Decision
}

// ApplyResult is the outcome of one decision of an ApplyBatch: the group's
// version afterwards and how many of its launches wait in the LAUNCHED
// queue for slots (the others were placed at once), or the error Apply
// would have returned.
type ApplyResult struct {
	Version int64
	Queued  int
	Err     error
}

// ApplyBatch applies every decision (exactly Apply's semantics: fenced,
// version-checked, per group), all sent in ONE pipelined round trip of
// apply calls of up to applyGroupsPerCall groups and applyActionsPerCall
// actions each (a call checks the
// fence and reads the clock once for its groups). Results are in order
// and independent: one group's ErrStale, ErrDuplicate or ErrInvalid leaves
// the others as they are; ErrFenced is every group's of the call. NOSCRIPT
// is handled as in every call (reload, resend the failed ones).
func (s *Store) ApplyBatch(ctx context.Context, f Fence, ds []GroupDecision) []ApplyResult {
	out := make([]ApplyResult, len(ds))
	sk, sa := s.applyShared(f)
	head := func() scriptCall { return scriptCall{keys: slices.Clone(sk), args: slices.Clone(sa)} }
	var (
		parts   []scriptCall
		weights []int
		pos     []int
	)
	for i, gd := range ds {
		part, err := s.applyPart(gd.Group, gd.Decision)
		if err != nil {
			out[i].Err = err
			continue
		}
		parts, weights, pos = append(parts, part), append(weights, len(gd.Decision.Actions)), append(pos, i)
	}
	calls, n := packCalls(head, parts, applyGroupsPerCall, weights, applyActionsPerCall)
	vals, errs := s.runPipe(ctx, "apply", "apply", calls)
	vals, errs = callResults("apply", n, vals, errs)
	for j, i := range pos {
		if out[i].Err = errs[j]; out[i].Err == nil {
			out[i] = parseApply(vals[j])
		}
	}
	return out
}

// retention reads a retention_ms value: absent or -1 = the default (-1).
func retention(v any) time.Duration {
	if v == nil {
		return RetentionDefault
	}
	ms := toInt64(v)
	if ms < 0 {
		return RetentionDefault
	}
	return time.Duration(ms) * time.Millisecond
}

// ExpireChunk is the number of finished runs one expire script removes.
const ExpireChunk = 256

// Expire removes up to chunk (<= 0: ExpireChunk) of group's finished runs
// older than its retention (its own, else def; 0 = forever), with their
// index entries, in one fenced script, and reports how many and whether
// more may be due (then call it again). Errors: ErrFenced, ErrInvalid.
func (s *Store) Expire(ctx context.Context, f Fence, group string, def time.Duration, chunk int) (n int, more bool, err error) {
	if err := ValidateName("group", group); err != nil {
		return 0, false, err
	}
	if def < 0 {
		return 0, false, invalid("expire", "default retention %v is negative", def)
	}
	if chunk <= 0 {
		chunk = ExpireChunk
	}
	r := s.expireCalls(ctx, f, []string{group}, def, chunk)[0]
	return r.Removed, r.More, r.Err
}

// chunkReply parses the {done, more (0|1)} reply of a chunked script
// (drain).
func chunkReply(op string, v any) (int, bool, error) {
	a, _ := v.([]any)
	if len(a) < 2 {
		return 0, false, fmt.Errorf("storage: %s: unexpected reply %v", op, v)
	}
	return int(toInt64(a[0])), toInt64(a[1]) == 1, nil
}

// GroupDecisionRecord is one entry of a group's decision history.
type GroupDecisionRecord struct {
	At                        time.Time
	ID                        string // claim: epoch:group:version
	Epoch                     int64
	Policy, PolicyVersion     string
	PolicyRegistry            int
	Launched, Discarded, Stop int
	DiscardBelow              int64
}

// GroupDecisions returns group's latest applied decisions (at most
// DecisionsKept), newest first.
func (s *Store) GroupDecisions(ctx context.Context, group string) ([]GroupDecisionRecord, error) {
	if err := ValidateName("group", group); err != nil {
		return nil, err
	}
	vs, err := s.c.LRange(ctx, s.k.Decisions(group), 0, DecisionsKept-1).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: group decisions: %w", err)
	}
	out := make([]GroupDecisionRecord, 0, len(vs))
	for _, v := range vs {
		if d, ok := parseGroupDecision(v); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// parseGroupDecision parses one entry of a group's decisions list.
func parseGroupDecision(v string) (GroupDecisionRecord, bool) {
	f := strings.Split(v, "\x1f")
	if len(f) < 10 {
		return GroupDecisionRecord{}, false
	}
	n := func(i int) int64 { x, _ := strconv.ParseInt(f[i], 10, 64); return x }
	return GroupDecisionRecord{At: msTime(n(0)), ID: f[1], Epoch: n(2), Policy: f[3], PolicyVersion: f[4],
		PolicyRegistry: int(n(5)), Launched: int(n(6)), Discarded: int(n(7)), Stop: int(n(8)), DiscardBelow: n(9)}, true
}

// LatestDecisions returns each group's latest applied decision (nil for a
// group with none), in ONE pipelined round trip; at most MaxGetRuns groups.
func (s *Store) LatestDecisions(ctx context.Context, groups []string) ([]*GroupDecisionRecord, error) {
	if len(groups) > MaxGetRuns {
		return nil, invalid("latest decisions", "%d groups, at most %d per call", len(groups), MaxGetRuns)
	}
	for _, g := range groups {
		if err := ValidateName("group", g); err != nil {
			return nil, err
		}
	}
	cmds := make([]*redis.StringCmd, len(groups))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, g := range groups {
			cmds[i] = p.LIndex(ctx, s.k.Decisions(g), 0)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("storage: latest decisions: %w", err)
	}
	out := make([]*GroupDecisionRecord, len(groups))
	for i, c := range cmds {
		if d, ok := parseGroupDecision(c.Val()); ok && c.Err() == nil {
			out[i] = &d
		}
	}
	return out, nil
}

// QueuePosition returns a WAITING run's place in its group's queue: how
// many waiting runs are older (0 = the head) and how many wait in all, in
// one round trip. ok is false when the run is not waiting in group.
func (s *Store) QueuePosition(ctx context.Context, group, id string) (ahead, total int64, ok bool, err error) {
	if err := ValidateName("group", group); err != nil {
		return 0, 0, false, err
	}
	var rank *redis.IntCmd
	var card *redis.IntCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		rank = p.ZRank(ctx, s.k.Waiting(group), id)
		card = p.ZCard(ctx, s.k.Waiting(group))
		return nil
	})
	if err != nil && err != redis.Nil {
		return 0, 0, false, fmt.Errorf("storage: queue position: %w", err)
	}
	if rank.Err() == redis.Nil {
		return 0, card.Val(), false, nil
	}
	return rank.Val(), card.Val(), true, nil
}

// SlotQueuePosition is where a LAUNCHED run waits for slots: how many
// launched runs are ahead of it in the slot manager's queue (ok false: it
// is not in it) and how many slots are free in the namespace (on live and
// not yet reaped workers alike).
func (s *Store) SlotQueuePosition(ctx context.Context, id string) (ahead, free int64, ok bool, err error) {
	var rank, card *redis.IntCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		rank = p.ZRank(ctx, s.k.Launched(), id)
		card = p.ZCard(ctx, s.k.Free())
		return nil
	})
	if err != nil && err != redis.Nil {
		return 0, 0, false, fmt.Errorf("storage: slot queue position: %w", err)
	}
	if rank.Err() == redis.Nil {
		return 0, card.Val(), false, nil
	}
	return rank.Val(), card.Val(), true, nil
}

// ExpireResult is one group's outcome in an ExpireBatch.
type ExpireResult struct {
	Removed int
	More    bool
	Err     error
}

// ExpireBatch is Expire (one chunk) for many groups: calls of up to
// expireGroupsPerCall groups (fenced once a call, its chunk of
// ExpireChunk runs shared by its groups, expire.lua), all in ONE pipelined
// round trip; results are in order (a group its call's chunk did not
// reach says More).
func (s *Store) ExpireBatch(ctx context.Context, f Fence, groups []string, def time.Duration) []ExpireResult {
	return s.expireCalls(ctx, f, groups, def, ExpireChunk)
}

// expireGroupsPerCall is how many groups one expire call carries at most.
const expireGroupsPerCall = 32

func (s *Store) expireCalls(ctx context.Context, f Fence, groups []string, def time.Duration, chunk int) []ExpireResult {
	out := make([]ExpireResult, len(groups))
	if def < 0 {
		for i := range out {
			out[i].Err = invalid("expire", "default retention %v is negative", def)
		}
		return out
	}
	k := s.k
	head := func() scriptCall {
		return scriptCall{keys: []string{k.Fence(), k.Lock(), k.Runs(), k.Retire()},
			args: append(f.args(), k.RunPrefix(), def.Milliseconds(), chunk)}
	}
	parts := make([]scriptCall, 0, len(groups))
	pos := make([]int, 0, len(groups))
	for i, g := range groups {
		if err := ValidateName("group", g); err != nil {
			out[i].Err = err
			continue
		}
		parts = append(parts, scriptCall{keys: []string{k.Group(g), k.Finished(g)}, args: []any{g}})
		pos = append(pos, i)
	}
	calls, n := packCalls(head, parts, expireGroupsPerCall, nil, 0)
	vals, errs := s.runPipe(ctx, "expire", "expire", calls)
	vals, errs = callResults("expire", n, vals, errs)
	for j, i := range pos {
		if out[i].Err = errs[j]; out[i].Err != nil {
			continue
		}
		a, _ := vals[j].([]any)
		if len(a) < 2 {
			out[i].Err = fmt.Errorf("storage: expire: unexpected reply %v", vals[j])
			continue
		}
		out[i] = ExpireResult{Removed: int(toInt64(a[0])), More: toInt64(a[1]) == 1}
	}
	return out
}

// RetireDue returns up to limit groups whose oldest finished run may be
// due for removal at now (Keys.Retire), and when the next group not among
// them is due (zero if none is).
func (s *Store) RetireDue(ctx context.Context, now time.Time, limit int) (due []string, next time.Time, err error) {
	var dueCmd *redis.StringSliceCmd
	var nextCmd *redis.ZSliceCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		dueCmd = p.ZRangeByScore(ctx, s.k.Retire(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: int64(limit)})
		nextCmd = p.ZRangeByScoreWithScores(ctx, s.k.Retire(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf", Count: 1})
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("storage: retire: %w", err)
	}
	if z := nextCmd.Val(); len(z) == 1 && !math.IsInf(z[0].Score, 1) {
		next = msTime(int64(z[0].Score))
	}
	return dueCmd.Val(), next, nil
}

// NextRetire returns when the first group of the retire index is due
// (zero if none is, or it is kept forever).
func (s *Store) NextRetire(ctx context.Context) (time.Time, error) {
	z, err := s.c.ZRangeWithScores(ctx, s.k.Retire(), 0, 0).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("storage: retire: %w", err)
	}
	if len(z) == 0 || math.IsInf(z[0].Score, 1) {
		return time.Time{}, nil
	}
	return msTime(int64(z[0].Score)), nil
}

// RetireGroups returns every group of the retire index (the retention
// task's first pass of a term also visits these: a deleted group's
// finished runs are only here).
func (s *Store) RetireGroups(ctx context.Context) ([]string, error) {
	names, err := s.c.ZRange(ctx, s.k.Retire(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: retire: %w", err)
	}
	return names, nil
}

// GroupNames returns every group's name (the groups set; unsorted).
func (s *Store) GroupNames(ctx context.Context) ([]string, error) {
	names, err := s.c.SMembers(ctx, s.k.Groups()).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: group names: %w", err)
	}
	return names, nil
}

// DrainGroups returns up to limit groups whose discard_below still covers
// WAITING runs (the drain set).
func (s *Store) DrainGroups(ctx context.Context, limit int) ([]string, error) {
	out, err := s.c.SRandMemberN(ctx, s.k.Drain(), int64(max(limit, 1))).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: drain groups: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// Drain discards up to chunk (<= 0: DrainChunk) of group's WAITING runs
// covered by its discard_below, in one fenced script, and reports how many
// and whether more may remain (then call it again). Errors: ErrFenced.
func (s *Store) Drain(ctx context.Context, f Fence, group string, chunk int) (n int, more bool, err error) {
	if err := ValidateName("group", group); err != nil {
		return 0, false, err
	}
	if chunk <= 0 {
		chunk = DrainChunk
	}
	k := s.k
	v, err := s.run(ctx, "drain", "drain", []string{k.Fence(), k.Lock(), k.Group(group), k.Waiting(group), k.Drain(), k.Finished(group), k.WaitInfo(group), k.Retire()},
		append(f.args(), group, k.RunPrefix(), chunk, k.RunEvents())...)
	if err != nil {
		return 0, false, err
	}
	return chunkReply("drain", v)
}

// RequestStop is a client's stop request: WAITING -> DISCARDED, LAUNCHED ->
// STOPPED, RUNNING -> STOPPING (the worker finishes it); a final run is
// ErrBadState, an unknown run ErrNotFound. Bumps the group version.
func (s *Store) RequestStop(ctx context.Context, id, reason string) (Run, error) {
	const op = "stop"
	if len(reason) > MaxStopReason {
		return Run{}, invalid(op, "run %s: reason is %d bytes, at most %d", id, len(reason), MaxStopReason)
	}
	g, err := s.runGroup(ctx, op, id)
	if err != nil {
		return Run{}, err
	}
	k := s.k
	if _, err := s.run(ctx, op, "request_stop",
		[]string{k.Run(id), k.Group(g), k.Waiting(g), k.Active(g), k.Launched(), k.Dirty(), k.Finished(g), k.WaitInfo(g), k.Retire(), k.Delayed(g), k.LaunchInfo()},
		id, g, reason, k.RunEvents(), k.SlotEventsPrefix(), k.WorkEvents()); err != nil {
		return Run{}, err
	}
	return s.GetRun(ctx, id)
}

// runGroup reads the (immutable) group of a run.
func (s *Store) runGroup(ctx context.Context, op, id string) (string, error) {
	if err := ValidateName("run", id); err != nil {
		return "", fmt.Errorf("storage: %s: %w", op, err)
	}
	g, err := s.c.HGet(ctx, s.k.Run(id), "group").Result()
	if err == redis.Nil {
		return "", fmt.Errorf("storage: %s: run %s: %w", op, id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("storage: %s: run %s: %w", op, id, err)
	}
	return g, nil
}
