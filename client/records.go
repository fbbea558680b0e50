package client

import (
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// The records below are the one vocabulary of wasmsched: the Go client
// returns them, the HTTP API serves them and the CLI prints them with
// -o json, so the same thing has the same JSON everywhere
// (testdata/records/*.json are their goldens). Conventions: times are
// RFC 3339 in UTC (Redis TIME, milliseconds) and null when not reached;
// durations are integer milliseconds in fields ending in _ms; lists are []
// when empty, never null; every record has the same keys whatever its state.

// Run is one run of a group.
type Run struct {
	ID    string `json:"id"`
	Group string `json:"group"`
	// Seq is the namespace-wide submit order.
	Seq int64 `json:"seq"`
	// State is WAITING, LAUNCHED, RUNNING, STOPPING, SUCCEEDED, FAILED,
	// STOPPED or DISCARDED.
	State    string `json:"state"`
	Slots    int    `json:"slots"`
	Priority int    `json:"priority"`
	// Payload is handed to the worker as is.
	Payload string `json:"payload"`
	// DurationMS is how long a simulated worker runs it (0: the worker's
	// own work decides).
	DurationMS int64 `json:"duration_ms"`
	// Policy and PolicyVersion are the policy (and its sha256 prefix) of
	// the decision that launched it; "" before.
	Policy        string     `json:"policy"`
	PolicyVersion string     `json:"policy_version"`
	SubmittedAt   *time.Time `json:"submitted_at"`
	LaunchedAt    *time.Time `json:"launched_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	Reason        string     `json:"reason"`
	// Decision is the last policy decision that moved it (launch, discard
	// or stop); null when none did (waiting, or stopped by a client).
	Decision *Decision `json:"decision"`
	// Assignments are its task slots while it holds them, by task.
	Assignments []Assignment `json:"assignments"`
	// NotBefore: it is not launched before (null: no delay). A WAITING
	// run whose not_before is ahead is not due yet: a delay, or (attempt
	// > 1) its retry's backoff.
	NotBefore *time.Time `json:"not_before"`
	// TimeoutMS is each attempt's timeout (0: none); Deadline is when the
	// running attempt times out (null unless RUNNING with a timeout).
	TimeoutMS int64      `json:"timeout_ms"`
	Deadline  *time.Time `json:"deadline"`
	// Attempt is its current attempt, of MaxAttempts (1 of 1: no retries).
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// RetryBackoffMS and RetryCapMS: attempt n+1 is due
	// min(cap, backoff·2^(n-1)) after attempt n failed, half of it random.
	RetryBackoffMS int64 `json:"retry_backoff_ms"`
	RetryCapMS     int64 `json:"retry_cap_ms"`
	// Attempts are its finished attempts, oldest first (the last 20).
	Attempts []Attempt `json:"attempts"`
	// Schedule is the schedule that submitted it ("": a client).
	Schedule string `json:"schedule"`
	// What its last finished attempt produced: a handler's result (at
	// most 64 KiB), the last 4 KiB of a program's stdout and stderr, its
	// exit code (null: none).
	Result   string `json:"result"`
	Output   string `json:"output"`
	ExitCode *int   `json:"exit_code"`
	// Labels are its keys (at most 16; {} when none): set at submit, seen
	// by its group's policy, a filter of the listing.
	Labels map[string]string `json:"labels"`
	// Require are its own requirements of a worker (submit --require), on
	// top of its group's (absent: none).
	Require map[string]string `json:"require,omitempty"`
	// SameWorker: all of its slots on one worker (submit --same-worker).
	SameWorker bool `json:"same_worker,omitempty"`
	// Prefer are its own preferences of a worker, "key=value:weight"
	// (submit --prefer), on top of its group's (absent: none).
	Prefer []string `json:"prefer,omitempty"`
	// Progress is what its handler last reported of the attempt (absent:
	// nothing; worker.Run.Progress).
	Progress *Progress `json:"progress,omitempty"`
	// TraceParent is the W3C trace context it was submitted with (absent:
	// none): its submit span's, which the leader's and the worker's spans
	// are children of.
	TraceParent string `json:"traceparent,omitempty"`
}

// Progress is a handler's latest report of how far its attempt is.
type Progress struct {
	// Fraction done, 0 to 1 (null: the handler did not say).
	Fraction *float64  `json:"fraction"`
	Message  string    `json:"message"`
	At       time.Time `json:"at"`
}

// Attempt is one finished attempt of a run.
type Attempt struct {
	N          int        `json:"n"`
	Worker     string     `json:"worker"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Outcome    string     `json:"outcome"` // SUCCEEDED, FAILED or STOPPED
	Reason     string     `json:"reason"`
}

// Final reports whether the run has ended.
func (r Run) Final() bool { return storage.State(r.State).Final() }

// Decision is the record of the policy decision that moved a run.
type Decision struct {
	ID             string    `json:"id"` // epoch:group:version
	Epoch          int64     `json:"epoch"`
	At             time.Time `json:"at"`
	Action         string    `json:"action"` // launch, discard or stop
	Reason         string    `json:"reason"`
	Policy         string    `json:"policy"`
	PolicyVersion  string    `json:"policy_version"`
	PolicySHA256   string    `json:"policy_sha256"`
	PolicyRegistry int       `json:"policy_registry"` // 0 = the built-in
}

// Assignment is one task slot of a run: worker, slot index, assignment
// token; task 0 executes the run, the others are reserved capacity.
type Assignment struct {
	Worker string `json:"worker"`
	Slot   int    `json:"slot"`
	Token  string `json:"token"`
	Task   int    `json:"task"`
}

// Group is a serial group: its settings, its counts and (from Group, not
// Groups) its queue and latest decisions.
type Group struct {
	Name      string `json:"name"`
	Policy    string `json:"policy"`
	MaxActive int    `json:"max_active"`
	// Window is how many of its oldest and newest waiting runs a policy sees.
	Window int `json:"window"`
	// Retention is how long its finished runs are kept: "default" (the
	// leader's serve --retention), "forever", or a duration ("36h0m0s").
	Retention string `json:"retention"`
	Version   int64  `json:"version"`
	Waiting   int    `json:"waiting"`
	Active    int    `json:"active"`
	// Delayed counts its WAITING runs not due yet (not in Waiting).
	Delayed int `json:"delayed"`
	// RunTimeoutMS, MaxAttempts, RetryBackoffMS and RetryCapMS are the
	// defaults of runs submitted without their own (0: none).
	RunTimeoutMS   int64 `json:"run_timeout_ms"`
	MaxAttempts    int   `json:"max_attempts"`
	RetryBackoffMS int64 `json:"retry_backoff_ms"`
	RetryCapMS     int64 `json:"retry_cap_ms"`
	// Paused: the leader decides nothing for it (no launch) until resumed;
	// PausedAt and PausedBy say when and who (null, "" when not paused).
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at"`
	PausedBy string     `json:"paused_by"`
	// Params are the settings of its policy (at most 32; {} when none):
	// `group set --param`. WakeAt is when its policy asked to be decided
	// again (null: no wake pending).
	Params map[string]string `json:"params"`
	WakeAt *time.Time        `json:"wake_at"`
	// Require are the labels a worker must carry to take its runs
	// (`group set --require`; absent: none).
	Require map[string]string `json:"require,omitempty"`
	// SameWorker: all of each run's slots on one worker (`group set
	// --same-worker`).
	SameWorker bool `json:"same_worker,omitempty"`
	// Prefer are the labels a worker had better carry to take its runs,
	// "key=value:weight" (`group set --prefer`; absent: none).
	Prefer []string `json:"prefer,omitempty"`
	// LatestDecision is its last applied decision (null if none).
	LatestDecision *GroupDecision `json:"latest_decision"`
	// Detail (Client.Group only; omitted from lists):
	// ActiveRuns are its LAUNCHED, RUNNING and STOPPING runs.
	ActiveRuns []Run `json:"active_runs,omitempty"`
	// Queue is its waiting runs oldest first; of a deep group the window
	// its policy sees (QueueTruncated), of QueueTotal.
	Queue          []Run `json:"queue,omitempty"`
	QueueTotal     int   `json:"queue_total,omitempty"`
	QueueTruncated bool  `json:"queue_truncated,omitempty"`
	// Decisions are its latest applied decisions, newest first.
	Decisions []GroupDecision `json:"decisions,omitempty"`
}

// Schedule is a cron schedule: one run submitted to Group per tick.
type Schedule struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Cron  string `json:"cron"`
	TZ    string `json:"tz"` // "" = UTC
	// The runs it submits (0: the group's defaults).
	Payload        string `json:"payload"`
	Priority       int    `json:"priority"`
	Slots          int    `json:"slots"`
	TimeoutMS      int64  `json:"timeout_ms"`
	MaxAttempts    int    `json:"max_attempts"`
	RetryBackoffMS int64  `json:"retry_backoff_ms"`
	RetryCapMS     int64  `json:"retry_cap_ms"`
	Paused         bool   `json:"paused"`
	// Next is its next tick (null when paused); LastTick and LastRun the
	// last one submitted.
	Next     *time.Time `json:"next"`
	LastTick *time.Time `json:"last_tick"`
	LastRun  string     `json:"last_run"`
	// Submitted counts its ticks submitted; Missed the ticks skipped
	// while no leader ran (the latest missed tick is submitted once).
	Submitted int64      `json:"submitted"`
	Missed    int64      `json:"missed"`
	CreatedAt *time.Time `json:"created_at"`
	UpdatedAt *time.Time `json:"updated_at"`
}

// GroupDecision is one applied decision of a group, in counts.
type GroupDecision struct {
	At             time.Time `json:"at"`
	ID             string    `json:"id"` // epoch:group:version
	Epoch          int64     `json:"epoch"`
	Policy         string    `json:"policy"`
	PolicyVersion  string    `json:"policy_version"`
	PolicyRegistry int       `json:"policy_registry"` // 0 = the built-in
	Launched       int       `json:"launched"`
	Discarded      int       `json:"discarded"`
	Stopped        int       `json:"stopped"`
	// DiscardBelow: every waiting run with a smaller seq was discarded (0 = none).
	DiscardBelow int64 `json:"discard_below"`
}

// Slots is the namespace's slot table.
type Slots struct {
	Workers []Worker `json:"workers"`
	// Free and Assigned count the slots of live workers; Free only those a
	// run may be placed on: the free slots of draining workers are Draining.
	Free     int `json:"free"`
	Assigned int `json:"assigned"`
	Draining int `json:"draining"`
}

// Worker is one registered worker and its slots.
type Worker struct {
	Identity string `json:"identity"`
	// Alive: its heartbeat has not expired (Redis time).
	Alive bool `json:"alive"`
	// Draining: it is shutting down gracefully and takes no new run.
	Draining bool      `json:"draining"`
	Expires  time.Time `json:"expires"`
	Slots    []Slot    `json:"slots"`
	// Labels and Groups are what it registered for placement (worker
	// --label, --groups): a group's requirements must be among its labels,
	// and with groups it takes only runs of the groups they match (absent:
	// none, every group).
	Labels map[string]string `json:"labels,omitempty"`
	Groups []string          `json:"groups,omitempty"`
}

// Slot is one slot of a worker; Run, Token and RunState are "" when free.
type Slot struct {
	Index    int    `json:"index"`
	Run      string `json:"run"`
	Task     int    `json:"task"`
	Token    string `json:"token"`
	RunState string `json:"run_state"`
}

// Leader is who leads the namespace. Identity is "" and Since null when
// nobody does (lock absent or expired); Epoch is then the last leader's
// (0 if there never was one).
type Leader struct {
	Namespace string     `json:"namespace"`
	Identity  string     `json:"identity"`
	Epoch     int64      `json:"epoch"`
	Since     *time.Time `json:"since"`
	// LastTick is the leader's last fenced liveness write (null if none).
	LastTick *Tick `json:"last_tick"`
}

// Tick is a leader's fenced liveness write (every lease TTL/3).
type Tick struct {
	Holder string    `json:"holder"`
	Epoch  int64     `json:"epoch"`
	At     time.Time `json:"at"`
	Count  int64     `json:"count"` // ticks of this term so far
}

// Policy is a named policy: its registry versions and history, or a
// built-in that was never pushed (Builtin, no versions).
type Policy struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // serial or slot-reuse
	// Active is the active registry version; 0 = the built-in (or, for a
	// name that is not a built-in, none: its groups wait).
	Active   int             `json:"active"`
	Builtin  bool            `json:"builtin"`
	Versions []PolicyVersion `json:"versions"`
	History  []PolicyEvent   `json:"history"`
	// AutoRollback is the last automatic rollback by a host (null if none).
	AutoRollback *AutoRollback `json:"auto_rollback"`
}

// PolicyVersion is one pushed version of a policy.
type PolicyVersion struct {
	Version  int       `json:"version"` // 1, 2, ... in push order
	SHA256   string    `json:"sha256"`
	PushedAt time.Time `json:"pushed_at"`
	Who      string    `json:"who"`
	Note     string    `json:"note"`
	Deleted  bool      `json:"deleted"`
}

// PolicyEvent is one entry of a policy's history: push, activate,
// rollback, auto-rollback or delete.
type PolicyEvent struct {
	At      time.Time `json:"at"`
	Who     string    `json:"who"`
	Action  string    `json:"action"`
	Version int       `json:"version"`
	Note    string    `json:"note"`
}

// AutoRollback is a rollback a host made after a version's decisions kept
// failing (To 0 = the built-in).
type AutoRollback struct {
	From   int       `json:"from"`
	To     int       `json:"to"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Explanation says why a run waits, or what moved it (`run explain`).
type Explanation struct {
	Run Run `json:"run"`
	// Why is the explanation in words.
	Why string `json:"why"`
	// For a WAITING run (else zero and omitted):
	// Ahead is how many waiting runs are older (0 = the head); Place is
	// its place in the queue, 1-based (Ahead+1) of Waiting.
	Ahead     int    `json:"ahead,omitempty"`
	Place     int    `json:"place,omitempty"`
	Waiting   int    `json:"waiting,omitempty"`
	MaxActive int    `json:"max_active,omitempty"`
	Active    []Run  `json:"active,omitempty"` // the group's active runs
	Policy    string `json:"policy,omitempty"` // the group's policy and version
	// InWindow: the policy sees the run (a deep group shows a window).
	InWindow bool `json:"in_window,omitempty"`
	// Now is what the group's policy decides for it on the live state,
	// read-only: launch, discard, discard_below or "" (nothing).
	Now       string `json:"now,omitempty"`
	NowReason string `json:"now_reason,omitempty"`
	// WakeAt: the policy does nothing to it now and asked to decide the
	// group again then (ABI v4).
	WakeAt *time.Time `json:"wake_at,omitempty"`
}

// PolicyDecision is what a policy decided for a snapshot and its verdict
// (`policy dry-run`, `policy test`, the API's dry-run).
type PolicyDecision struct {
	Policy  string   `json:"policy"`  // e.g. "priority v3", "wait (built-in)", a file
	Version string   `json:"version"` // sha256 of the module
	Valid   bool     `json:"valid"`
	Outcome string   `json:"outcome"` // valid, invalid, timeout or trap
	Errors  []string `json:"errors"`
	Actions []Action `json:"actions"`
}

// Action is one action of a decision.
type Action struct {
	Action string     `json:"action"` // launch, discard, stop, discard_below or wake
	Run    string     `json:"run"`
	Seq    uint64     `json:"seq,omitempty"` // of a discard_below: every waiting run below it
	At     *time.Time `json:"at,omitempty"`  // of a wake: when the host decides the group again (the policy's ask, bounded)
	// AskedMS is the wake the policy asked for, unix ms, when the host
	// moves it (in the past: to 100 ms after the decision; beyond 24 h: to
	// 24 h after it, and the policy is asked again then); 0 when At is it.
	AskedMS int64  `json:"asked_ms,omitempty"`
	Reason  string `json:"reason"`
}

// Key is what decision diffs and expectations compare actions by: the
// run, for a discard_below the seq it covers, for a wake its time.
func (a Action) Key() string {
	switch a.Action {
	case "discard_below":
		return fmt.Sprintf("(waiting runs below seq %d)", a.Seq)
	case "wake":
		if a.At != nil {
			return "(wake at " + a.At.UTC().Format(time.RFC3339Nano) + ")"
		}
		return "(wake)"
	}
	return a.Run
}

// DryRun is a candidate policy's decision on a live group beside the
// decision of the group's own policy, and where they differ.
type DryRun struct {
	PolicyDecision
	Group  string          `json:"group"`
	Active *PolicyDecision `json:"active"`
	Diff   []ActionDiff    `json:"diff"`
}

// ActionDiff is one run on which two decisions differ ("none" for no action).
type ActionDiff struct {
	Run       string `json:"run"`
	Active    string `json:"active"`
	Candidate string `json:"candidate"`
}

// SeriesPoint is one point of a time series the leader keeps (one per 10
// s while anything happens, 24 h of them): what happened in the interval
// before At and the state at At. Of the namespace: SlotsUsed of
// SlotsTotal; of a group: WaitP50MS and WaitP95MS, the wait (submit to
// launch) of the runs it launched in the interval.
type SeriesPoint struct {
	At         time.Time `json:"at"`
	Launches   int       `json:"launches"`
	Finishes   int       `json:"finishes"`
	Waiting    int       `json:"waiting"`
	Active     int       `json:"active"`
	SlotsUsed  int       `json:"slots_used,omitempty"`
	SlotsTotal int       `json:"slots_total,omitempty"`
	WaitP50MS  int64     `json:"wait_p50_ms,omitempty"`
	WaitP95MS  int64     `json:"wait_p95_ms,omitempty"`
}

// Series is a time series: its points, oldest first, IntervalMS apart at
// most (a gap: nothing happened).
type Series struct {
	Group      string        `json:"group,omitempty"` // "" = the namespace
	IntervalMS int64         `json:"interval_ms"`
	Points     []SeriesPoint `json:"points"`
}
