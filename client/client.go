package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
	"github.com/wasmsched/wasmsched/storage"
)

// Sentinel errors (errors.Is). They are wasmsched's one set of sentinels,
// so an error from any wasmsched package matches them.
var (
	ErrNotFound    = errs.ErrNotFound    // no such run or group (or it expired)
	ErrInvalid     = errs.ErrInvalid     // bad input: names, bounds, a bad cursor
	ErrExists      = errs.ErrDuplicate   // the run id exists (submitted by another call)
	ErrConflict    = errs.ErrConflict    // an idempotency key reused with another request (the error names its run)
	ErrBadState    = errs.ErrBadState    // the run cannot make that change (e.g. stop a finished run)
	ErrOutOfMemory = errs.ErrOutOfMemory // Redis is at maxmemory: nothing was written
	// ErrNotReplicated: the write reached the master but no replica
	// acknowledged it in time (durable=, docs/operations.md "What survives
	// what"); a failover could lose it. Retry; with an idempotency key a
	// submit is safe to retry.
	ErrNotReplicated = errs.ErrNotReplicated
)

// Defaults and bounds.
const (
	// DefaultNamespace is the namespace of a zero Config.Namespace.
	DefaultNamespace = "default"
	// DefaultRedis is the URL of a zero Config.Redis.
	DefaultRedis = "redis://127.0.0.1:6379/0"
	// DefaultListLimit and MaxListLimit bound a List page.
	DefaultListLimit = 100
	MaxListLimit     = 1000
	// MaxGetRuns bounds the ids of one GetRuns call.
	MaxGetRuns = 10_000
	// RetentionDefault, as GroupSettings.Retention, returns a group to
	// the namespace's default retention.
	RetentionDefault time.Duration = -1
)

// Config configures New. The zero value connects to redis://127.0.0.1:6379/0,
// namespace "default".
type Config struct {
	// Redis is the URL of the namespace's Redis (redis://, rediss://,
	// redis+cluster://, redis+sentinel://; see docs/operations.md).
	Redis string
	// Namespace is the wasmsched namespace; "" = DefaultNamespace.
	Namespace string
}

// Validate reports a bad URL or namespace name.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := storage.ParseRedisURL(c.Redis); err != nil {
		return fmt.Errorf("client: Redis: %w", err)
	}
	if err := limits.ValidateName("namespace", c.Namespace); err != nil {
		return fmt.Errorf("client: Namespace: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Redis == "" {
		c.Redis = DefaultRedis
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	return c
}

// Client is safe for concurrent use.
type Client struct {
	st     *storage.Store
	close  func() error
	tracer trace.Tracer
}

// New connects to cfg.Redis (the connection is checked) and opens
// cfg.Namespace. Close it when done.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rdb, err := storage.Connect(ctx, cfg.Redis)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	st, err := storage.New(rdb, cfg.Namespace)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{st: st, close: rdb.Close, tracer: tracing.Tracer(nil)}, nil
}

// NewFromRedis opens namespace over a go-redis client the application
// already has (single node, Sentinel or Cluster), so one connection pool
// serves both. Close does not close rdb.
func NewFromRedis(rdb redis.UniversalClient, namespace string) (*Client, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	st, err := storage.New(rdb, namespace)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{st: st, close: func() error { return nil }, tracer: tracing.Tracer(nil)}, nil
}

// Close closes the client's connection (not one given to NewFromRedis).
func (c *Client) Close() error { return c.close() }

// Namespace is the client's namespace.
func (c *Client) Namespace() string { return c.st.Namespace() }

// SubmitOptions are a run's settings; the zero value is one slot,
// priority 0, a generated id.
type SubmitOptions struct {
	ID       string // "" = generated ("r-...")
	Slots    int    // task slots; 0 = 1
	Priority int    // read by the priority policy (higher first)
	Payload  string // handed to the worker
	Duration time.Duration
	// IdempotencyKey: a second Submit with the same key (within 24 h, while
	// the run exists) returns the first one's run instead of a new one.
	IdempotencyKey string
	// NotBefore (zero = none): not launched before it, by Redis time; a
	// time in the past is now, at most a year ahead.
	NotBefore time.Time
	// Timeout (0 = the group's run timeout, if any): each attempt is
	// stopped after it and FAILED "timed out after D".
	Timeout time.Duration
	// MaxAttempts (0 = the group's, else 1) bounds its attempts, 1..100: a
	// FAILED (or timed-out) attempt is retried after RetryBackoff (0 = the
	// group's, else 1s) doubling per attempt up to RetryCap (0 = the
	// group's, else 10m), half of it random. STOPPED runs are not retried.
	MaxAttempts            int
	RetryBackoff, RetryCap time.Duration
	// Labels (at most 16; keys of 1 to 64 bytes of a-z, 0-9, '_', '.',
	// '-', values of at most 256 bytes without control characters) are
	// the run's keys: its group's policy sees them, List filters by them.
	Labels map[string]string
	// Require (at most 16, bounded as labels) are labels a worker must
	// carry to take the run, on top of its group's requirements (a key in
	// both: this value).
	Require map[string]string
	// SameWorker puts all of the run's slots on one worker.
	SameWorker bool
	// Prefer (at most 16, "key=value[:weight]", weights 1 to 1000, 1 when
	// not given) are labels a worker had better carry: soft, on top of its
	// group's preferences (a key in both: this one). Among the workers that
	// may take the run and have its slots free, one with the highest sum
	// of weights gets it.
	Prefer []string
}

// Submit adds a WAITING run to group (created with policy wait and
// max_active 1 if new). With an IdempotencyKey already used, it returns
// that run and replayed = true.
func (c *Client) Submit(ctx context.Context, group string, o SubmitOptions) (Run, error) {
	r, _, err := c.SubmitReplay(ctx, group, o)
	return r, err
}

// SubmitReplay is Submit that also says whether the run existed already
// (its idempotency key was used).
//
// The submit is a span, "wasmsched.submit", of the global OpenTelemetry
// tracer provider, a child of ctx's span; the run keeps its trace context
// (Run.TraceParent), so the leader's decision spans and the worker's
// execution span join ctx's trace. Without an OpenTelemetry SDK the span
// records nothing and the run keeps ctx's own trace context, if any.
func (c *Client) SubmitReplay(ctx context.Context, group string, o SubmitOptions) (Run, bool, error) {
	prefer, err := parsePrefer(o.Prefer)
	if err != nil {
		return Run{}, false, fmt.Errorf("submit %s: %w", group, err)
	}
	ctx, span := c.tracer.Start(ctx, tracing.SpanSubmit, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	r, replayed, err := c.st.SubmitReplay(ctx, storage.SubmitRequest{Group: group, ID: o.ID, Slots: o.Slots, Prefer: prefer,
		Priority: o.Priority, Payload: o.Payload, Duration: o.Duration, IdempotencyKey: o.IdempotencyKey,
		NotBefore: o.NotBefore, Timeout: o.Timeout, Labels: limits.LabelsFromMap(o.Labels), Require: limits.LabelsFromMap(o.Require),
		SameWorker: o.SameWorker, Retry: storage.Retry{MaxAttempts: o.MaxAttempts, Base: o.RetryBackoff, Cap: o.RetryCap},
		TraceParent: tracing.Format(span.SpanContext())})
	if span.IsRecording() {
		span.SetAttributes(attribute.String("wasmsched.namespace", c.st.Namespace()), attribute.String("wasmsched.group", group),
			attribute.String("wasmsched.run", r.ID), attribute.Bool("wasmsched.replayed", replayed))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if err != nil {
		return Run{}, false, err
	}
	return runOf(r), replayed, nil
}

// Get reads a run (ErrNotFound: never submitted, or removed by retention).
func (c *Client) Get(ctx context.Context, id string) (Run, error) {
	r, err := c.st.GetRun(ctx, id)
	if err != nil {
		return Run{}, err
	}
	return runOf(r), nil
}

// Stop asks a run to end: a WAITING run is DISCARDED, a LAUNCHED one
// STOPPED, a RUNNING one STOPPING (its worker stops it). A run already
// final is ErrBadState.
func (c *Client) Stop(ctx context.Context, id, reason string) (Run, error) {
	if reason == "" {
		reason = "stopped by client"
	}
	r, err := c.st.RequestStop(ctx, id, reason)
	if err != nil {
		return Run{}, err
	}
	return runOf(r), nil
}

// ListOptions select a page of runs, newest first.
type ListOptions struct {
	Group  string // only this group's runs
	State  string // only runs in this state
	Cursor string // the Page.Next of the previous page; it carries Group and State
	// After lists the runs older than the run of seq After (a page by seq,
	// as `runs --after`); not with Cursor.
	After int64
	Limit int // 0 = DefaultListLimit; at most MaxListLimit
	// Labels: only runs carrying every one of these labels (the cursor
	// carries them too).
	Labels map[string]string
}

// Page is one page of runs. Next continues below the page's last run; it
// is "" only for an empty page, so passing a last page's Next gives an
// empty page, never the first one again. More says whether older runs
// (matching the filter) exist: false on the last page.
type Page struct {
	Runs []Run `json:"runs"`
	// Next is the cursor of the next page, "" on the last page (More
	// false): a cursor is never handed out for a page that would be empty.
	Next string `json:"next_cursor"`
	More bool   `json:"more"`
}

// List returns a page of runs, newest (highest seq) first. Pages never
// skip or repeat a run, also while runs are submitted: a page continues
// below the last seq of the previous one, and new runs get higher seqs.
func (c *Client) List(ctx context.Context, o ListOptions) (Page, error) {
	f := storage.RunFilter{Group: o.Group, State: storage.State(o.State), Limit: o.Limit, Below: o.After}
	if len(o.Labels) > 0 {
		ls, err := limits.NormalizeLabels("labels", limits.LabelsFromMap(o.Labels), abi.MaxLabels)
		if err != nil {
			return Page{}, fmt.Errorf("list: %v: %w", err, ErrInvalid)
		}
		f.Labels = ls
	}
	if o.After < 0 {
		return Page{}, fmt.Errorf("list: after %d: want a seq >= 1: %w", o.After, ErrInvalid)
	}
	if o.Cursor != "" && o.After != 0 {
		return Page{}, fmt.Errorf("list: a cursor and after both name a page; give one: %w", ErrInvalid)
	}
	if o.Cursor != "" {
		cf, err := storage.ParseCursor(o.Cursor)
		if err != nil {
			return Page{}, err
		}
		if (o.Group != "" && o.Group != cf.Group) || (o.State != "" && o.State != string(cf.State)) {
			return Page{}, fmt.Errorf("list: the cursor continues a listing of group %q state %q, not group %q state %q: %w",
				cf.Group, cf.State, o.Group, o.State, ErrInvalid)
		}
		if len(o.Labels) > 0 && !slices.Equal(f.Labels, cf.Labels) {
			return Page{}, fmt.Errorf("list: the cursor continues a listing with other labels: %w", ErrInvalid)
		}
		f.Group, f.State, f.Below, f.Labels = cf.Group, cf.State, cf.Below, cf.Labels
	}
	switch {
	case f.Limit == 0:
		f.Limit = DefaultListLimit
	case f.Limit < 0 || f.Limit > MaxListLimit:
		return Page{}, fmt.Errorf("list: limit %d: want 1 to %d: %w", o.Limit, MaxListLimit, ErrInvalid)
	}
	if f.State != "" && !validState(f.State) {
		return Page{}, fmt.Errorf("list: state %q is not a run state (%s): %w", f.State, strings.Join(States, ", "), ErrInvalid)
	}
	if f.Group != "" {
		if err := limits.ValidateName("group", f.Group); err != nil {
			return Page{}, err
		}
	}
	p, err := c.st.ListRunsPage(ctx, f)
	if err != nil {
		return Page{}, err
	}
	out := Page{Runs: runsOf(p.Runs), More: p.Next > 0}
	if out.More {
		out.Next = storage.RunPage{Next: p.Next}.Cursor(f)
	}
	return out, nil
}

// States are the run states, in lifecycle order.
var States = []string{"WAITING", "LAUNCHED", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED", "DISCARDED"}

func validState(s storage.State) bool { return slices.Contains(States, string(s)) }

// Group reads a group with its detail: its active runs (with their
// slots), its queue (the window its policy sees) and its latest
// decisions. ErrNotFound if it does not exist.
func (c *Client) Group(ctx context.Context, name string) (Group, error) {
	sg, err := c.st.GetGroup(ctx, name)
	if err != nil {
		return Group{}, err
	}
	g := groupOf(sg)
	sn, err := c.st.Snapshot(ctx, name)
	if err != nil {
		return Group{}, err
	}
	ids := make([]string, 0, len(sn.Active))
	for _, a := range sn.Active {
		ids = append(ids, a.ID)
	}
	act, err := c.st.GetRuns(ctx, ids) // the snapshot's runs carry no slots
	if err != nil {
		return Group{}, err
	}
	g.ActiveRuns, g.Queue = runsOf(act), runsOf(sn.Waiting)
	g.QueueTotal, g.QueueTruncated = sn.WaitingTotal, sn.WaitingTotal > len(sn.Waiting)
	ds, err := c.st.GroupDecisions(ctx, name)
	if err != nil {
		return Group{}, err
	}
	g.Decisions = make([]GroupDecision, 0, len(ds))
	for _, d := range ds {
		g.Decisions = append(g.Decisions, groupDecisionOf(d))
	}
	if len(g.Decisions) > 0 {
		g.LatestDecision = &g.Decisions[0]
	}
	return g, nil
}

// Groups lists the namespace's groups by name, each with its latest
// decision (one round trip for all; of the first MaxGetRuns
// groups).
func (c *Client) Groups(ctx context.Context) ([]Group, error) {
	gs, err := c.st.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.Name)
	}
	latest, err := c.st.LatestDecisions(ctx, names[:min(len(names), storage.MaxGetRuns)])
	if err != nil {
		return nil, err
	}
	out := make([]Group, 0, len(gs))
	for i, g := range gs {
		rg := groupOf(g)
		if i < len(latest) && latest[i] != nil {
			d := groupDecisionOf(*latest[i])
			rg.LatestDecision = &d
		}
		out = append(out, rg)
	}
	return out, nil
}

// GroupSettings change a group; zero fields keep the current value (a new
// group starts with policy wait, max_active 1, the default window and
// retention).
type GroupSettings struct {
	Policy    string `json:"policy,omitempty"`
	MaxActive int    `json:"max_active,omitempty"`
	Window    int    `json:"window,omitempty"`
	// Retention: nil keeps it; 0 = forever; RetentionDefault = the
	// namespace default (ParseRetention reads the CLI's and the API's form).
	Retention *time.Duration `json:"-"`
	// RunTimeout: nil keeps it; 0 = none; else the timeout of runs
	// submitted without one.
	RunTimeout *time.Duration `json:"-"`
	// Retry: nil keeps it; a zero Retry = none; else the retry policy of
	// runs submitted without one.
	Retry *Retry `json:"-"`
	// Params set the settings of the group's policy (at most 32, bounded
	// as labels are): each one given is set, one with an empty value
	// removed; with ReplaceParams they become exactly Params. Its policy
	// sees them (ABI v4); a new policy keeps them.
	Params        map[string]string `json:"-"`
	ReplaceParams bool              `json:"-"`
	// Require: nil keeps them; empty: none; else the labels a worker must
	// carry, every one, to take the group's runs (at most 16, bounded as
	// labels are). Runs launched from then on follow them.
	Require map[string]string `json:"-"`
	// SameWorker: nil keeps it; true puts all of each run's slots on one
	// worker (runs launched from then on).
	SameWorker *bool `json:"-"`
	// Prefer: nil keeps them; empty: none; else "key=value[:weight]" labels
	// a worker had better carry to take the group's runs (soft, weighted;
	// at most 16). Runs launched from then on follow them.
	Prefer []string `json:"-"`
}

// Retry is a retry policy: up to MaxAttempts attempts (1..100), attempt
// n+1 due min(Cap, Backoff·2^(n-1)) after attempt n failed (0 = 1s, 10m).
type Retry struct {
	MaxAttempts  int
	Backoff, Cap time.Duration
}

// SetGroup creates or changes a group and returns it.
func (c *Client) SetGroup(ctx context.Context, name string, s GroupSettings) (Group, error) {
	var retry *storage.Retry
	if s.Retry != nil {
		retry = &storage.Retry{MaxAttempts: s.Retry.MaxAttempts, Base: s.Retry.Backoff, Cap: s.Retry.Cap}
	}
	gs := storage.GroupSettings{Policy: s.Policy, MaxActive: s.MaxActive, Window: s.Window,
		Retention: s.Retention, RunTimeout: s.RunTimeout, Retry: retry, ReplaceParams: s.ReplaceParams, SameWorker: s.SameWorker}
	if s.Params != nil || s.ReplaceParams {
		gs.Params = limits.LabelsFromMap(s.Params)
	}
	if s.Require != nil {
		gs.Require = limits.LabelsFromMap(s.Require)
	}
	if s.Prefer != nil {
		ps, err := parsePrefer(s.Prefer)
		if err != nil {
			return Group{}, fmt.Errorf("group %s: %w", name, err)
		}
		gs.Prefer = append([]abi.Preference{}, ps...)
	}
	g, err := c.st.SetGroupSettings(ctx, name, gs)
	if err != nil {
		return Group{}, err
	}
	return groupOf(g), nil
}

// ScheduleSpec is what SetSchedule sets: a cron schedule of group. Cron is
// a 5-field expression ("*/5 * * * *") or a descriptor (@hourly,
// @every 30s, at least 1s apart), read in TZ (an IANA zone; "" = UTC).
// The runs it submits get Payload, Priority, Slots, Timeout and Retry
// (zero: the group's defaults). Paused makes it without ticking.
type ScheduleSpec struct {
	Group, Cron, TZ string
	Payload         string
	Priority, Slots int
	Timeout         time.Duration
	Retry           Retry
	Paused          bool
}

// SetSchedule creates or replaces schedule name (its counters kept); its
// next tick is the first after now. Exactly one run is submitted per tick
// across leader failover; of the ticks missed while no leader ran, only
// the latest is submitted (the others count in Missed).
func (c *Client) SetSchedule(ctx context.Context, name string, s ScheduleSpec) (Schedule, error) {
	sc, err := c.st.SetSchedule(ctx, storage.Schedule{Name: name, Group: s.Group, Cron: s.Cron, TZ: s.TZ, Payload: s.Payload,
		Priority: s.Priority, Slots: s.Slots, Timeout: s.Timeout, Paused: s.Paused,
		Retry: storage.Retry{MaxAttempts: s.Retry.MaxAttempts, Base: s.Retry.Backoff, Cap: s.Retry.Cap}})
	if err != nil {
		return Schedule{}, err
	}
	return scheduleOf(sc), nil
}

// Schedule reads a schedule (ErrNotFound if absent).
func (c *Client) Schedule(ctx context.Context, name string) (Schedule, error) {
	sc, err := c.st.GetSchedule(ctx, name)
	if err != nil {
		return Schedule{}, err
	}
	return scheduleOf(sc), nil
}

// Schedules lists the namespace's schedules by name.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	scs, err := c.st.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Schedule, 0, len(scs))
	for _, sc := range scs {
		out = append(out, scheduleOf(sc))
	}
	return out, nil
}

// PauseSchedule stops a schedule's ticks; ResumeSchedule goes on from the
// next tick after now (the ticks in between are not submitted).
func (c *Client) PauseSchedule(ctx context.Context, name string) error {
	return c.st.PauseSchedule(ctx, name)
}

// ResumeSchedule resumes a paused schedule.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (Schedule, error) {
	sc, err := c.st.ResumeSchedule(ctx, name)
	if err != nil {
		return Schedule{}, err
	}
	return scheduleOf(sc), nil
}

// DeleteSchedule deletes a schedule; the runs it submitted stay.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.st.DeleteSchedule(ctx, name)
}

// PauseGroup pauses a group: its policy is not asked and nothing launches
// until ResumeGroup; submits are accepted and its active runs go on. who
// is recorded (paused_by). ErrNotFound for an unknown group.
func (c *Client) PauseGroup(ctx context.Context, name, who string) error {
	return c.st.PauseGroup(ctx, name, who)
}

// ResumeGroup resumes a paused group (it is decided again at once).
func (c *Client) ResumeGroup(ctx context.Context, name string) error {
	return c.st.ResumeGroup(ctx, name)
}

// DiscardWaiting discards every waiting run of a group (the not-yet-due
// ones too), in bounded chunks, each with reason; it returns how many.
//
// With labels, only the runs carrying every one of them.
func (c *Client) DiscardWaiting(ctx context.Context, group, reason string, labels map[string]string) (int, error) {
	return c.st.DiscardWaiting(ctx, group, reason, limits.LabelsFromMap(labels)...)
}

// Retry puts a FAILED or STOPPED run back to WAITING as a new attempt of
// the same run (its earlier attempts kept; its group's policy decides it
// like any waiting run); who is named in its reason. A run in any other
// state is ErrBadState.
func (c *Client) Retry(ctx context.Context, id, who string) (Run, error) {
	r, err := c.st.RetryRun(ctx, id, who)
	if err != nil {
		return Run{}, err
	}
	return runOf(r), nil
}

// RetryOptions select a group's finished runs for RetryGroup.
type RetryOptions struct {
	// State is "FAILED" (the default) or "STOPPED".
	State string
	// Labels: only runs carrying all of them.
	Labels map[string]string
	// Since: only runs that finished at or after it (zero: any).
	Since time.Time
	// Limit: at most this many (0: all).
	Limit int
	// Who is named in the runs' reason.
	Who string
}

// RetryGroup retries the group's finished runs o selects, as Retry does
// each, and returns how many it put back.
func (c *Client) RetryGroup(ctx context.Context, group string, o RetryOptions) (int, error) {
	return c.st.RetryGroup(ctx, group, storage.RetryFilter{State: storage.State(o.State), Labels: limits.LabelsFromMap(o.Labels),
		Since: o.Since, Limit: o.Limit}, o.Who)
}

// StopActive asks every active run of a group to stop, with reason; it
// returns how many it asked (RUNNING ones end STOPPED once their worker
// stopped them).
//
// With labels, only the runs carrying every one of them.
func (c *Client) StopActive(ctx context.Context, group, reason string, labels map[string]string) (int, error) {
	return c.st.StopActive(ctx, group, reason, limits.LabelsFromMap(labels)...)
}

// Series reads the namespace's time series (group "") or a group's, the
// points of the last window (at most 24 h), oldest first.
func (c *Client) Series(ctx context.Context, group string, window time.Duration) (Series, error) {
	if window <= 0 || window > storage.SeriesPoints*storage.SeriesInterval {
		return Series{}, fmt.Errorf("series: window %v: want (0, 24h]: %w", window, ErrInvalid)
	}
	ps, err := c.st.Series(ctx, group, time.Now().Add(-window))
	if err != nil {
		return Series{}, err
	}
	out := Series{Group: group, IntervalMS: storage.SeriesInterval.Milliseconds(), Points: make([]SeriesPoint, 0, len(ps))}
	for _, p := range ps {
		out.Points = append(out.Points, SeriesPoint{At: p.At.UTC(), Launches: p.Launches, Finishes: p.Finishes, Waiting: p.Waiting,
			Active: p.Active, SlotsUsed: p.SlotsUsed, SlotsTotal: p.SlotsTotal, WaitP50MS: p.WaitP50.Milliseconds(), WaitP95MS: p.WaitP95.Milliseconds()})
	}
	return out, nil
}
