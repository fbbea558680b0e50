package client

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// Sentinel errors (errors.Is). They are the storage layer's, so an error
// from any wasmsched package matches them.
var (
	ErrNotFound    = storage.ErrNotFound    // no such run or group (or it expired)
	ErrInvalid     = storage.ErrInvalid     // bad input: names, bounds, a bad cursor
	ErrConflict    = storage.ErrDuplicate   // the run id exists (submitted by another call)
	ErrBadState    = storage.ErrBadState    // the run cannot make that change (e.g. stop a finished run)
	ErrOutOfMemory = storage.ErrOutOfMemory // Redis is at maxmemory: nothing was written
)

// DefaultNamespace is the namespace of a zero Config.Namespace.
const DefaultNamespace = "default"

// Config configures New. The zero value connects to redis://127.0.0.1:6379/0,
// namespace "default".
type Config struct {
	// Redis is the URL of the namespace's Redis (redis://, rediss://,
	// redis+cluster://, redis+sentinel://; see docs/operations.md).
	Redis string
	// Namespace is the wasmsched namespace; "" = DefaultNamespace.
	Namespace string
}

// DefaultRedis is the URL of a zero Config.Redis.
const DefaultRedis = "redis://127.0.0.1:6379/0"

// Validate reports a bad URL or namespace name.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := storage.ParseRedisURL(c.Redis); err != nil {
		return fmt.Errorf("client: Redis: %w", err)
	}
	if err := storage.ValidateName("namespace", c.Namespace); err != nil {
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
	st    *storage.Store
	close func() error
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
	return &Client{st: st, close: rdb.Close}, nil
}

// FromStore wraps an open store (the HTTP API and tests share the host's
// connection this way). Close does not close the store's connection.
func FromStore(st *storage.Store) *Client { return &Client{st: st, close: func() error { return nil }} }

// Close closes the client's connection.
func (c *Client) Close() error { return c.close() }

// Namespace is the client's namespace.
func (c *Client) Namespace() string { return c.st.Namespace() }

// Store is the storage layer under the client, for callers that need more
// than the client offers (the HTTP API, operators' tools).
func (c *Client) Store() *storage.Store { return c.st }

// Run is a run as applications see it (the JSON of `wasmsched run show -o
// json` and of the HTTP API).
type Run struct {
	ID            string     `json:"id"`
	Group         string     `json:"group"`
	Seq           int64      `json:"seq"`
	State         string     `json:"state"` // WAITING, LAUNCHED, RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED, DISCARDED
	Slots         int        `json:"slots"`
	Priority      int        `json:"priority"`
	Payload       string     `json:"payload,omitempty"`
	DurationMS    int64      `json:"duration_ms,omitempty"`
	Policy        string     `json:"policy"`
	PolicyVersion string     `json:"policy_version"`
	SubmittedAt   *time.Time `json:"submitted_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	Reason        string     `json:"reason"`
	// Decision is the decision that launched, discarded or stopped it.
	Decision    *Decision    `json:"decision,omitempty"`
	Assignments []Assignment `json:"assignments,omitempty"`
}

// Final reports whether the run has ended.
func (r Run) Final() bool { return storage.State(r.State).Final() }

// Decision is the record of the policy decision that moved a run.
type Decision struct {
	ID             string    `json:"id"` // epoch:group:version
	Epoch          int64     `json:"epoch"`
	At             time.Time `json:"at"`
	Action         string    `json:"action"`
	Reason         string    `json:"reason"`
	Policy         string    `json:"policy"`
	PolicyVersion  string    `json:"policy_version"`
	PolicySHA256   string    `json:"policy_sha256"`
	PolicyRegistry int       `json:"policy_registry"` // 0 = the built-in
}

// Assignment is one task slot of a running run.
type Assignment struct {
	Worker string `json:"worker"`
	Slot   int    `json:"slot"`
	Token  string `json:"token"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// FromStorage converts a storage run.
func FromStorage(r storage.Run) Run {
	out := Run{ID: r.ID, Group: r.Group, Seq: r.Seq, State: string(r.State), Slots: r.Slots, Priority: r.Priority,
		Payload: r.Payload, DurationMS: r.Duration.Milliseconds(), Policy: r.Policy, PolicyVersion: r.PolicyVersion,
		SubmittedAt: timePtr(r.SubmittedAt), StartedAt: timePtr(r.StartedAt), FinishedAt: timePtr(r.FinishedAt), Reason: r.Reason}
	if d := r.Decision; d != nil {
		out.Decision = &Decision{ID: d.ID, Epoch: d.Epoch, At: d.At.UTC(), Action: string(d.Action), Reason: d.Reason,
			Policy: d.Policy, PolicyVersion: d.PolicyVersion, PolicySHA256: d.PolicySHA256, PolicyRegistry: d.PolicyRegistry}
	}
	for _, a := range r.Assignments {
		out.Assignments = append(out.Assignments, Assignment{Worker: a.Worker, Slot: a.Slot, Token: a.Token})
	}
	return out
}

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
func (c *Client) SubmitReplay(ctx context.Context, group string, o SubmitOptions) (Run, bool, error) {
	r, replayed, err := c.st.SubmitReplay(ctx, storage.SubmitRequest{Group: group, ID: o.ID, Slots: o.Slots,
		Priority: o.Priority, Payload: o.Payload, Duration: o.Duration, IdempotencyKey: o.IdempotencyKey})
	if err != nil {
		return Run{}, false, err
	}
	return FromStorage(r), replayed, nil
}

// Get reads a run (ErrNotFound: never submitted, or removed by retention).
func (c *Client) Get(ctx context.Context, id string) (Run, error) {
	r, err := c.st.GetRun(ctx, id)
	if err != nil {
		return Run{}, err
	}
	return FromStorage(r), nil
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
	return FromStorage(r), nil
}

// DefaultListLimit and MaxListLimit bound a List page.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListOptions select a page of runs, newest first.
type ListOptions struct {
	Group  string // only this group's runs
	State  string // only runs in this state
	Cursor string // the Page.Next of the previous page; it carries Group and State
	Limit  int    // 0 = DefaultListLimit; at most MaxListLimit
}

// Page is one page of runs. Next is "" on the last page.
type Page struct {
	Runs []Run  `json:"runs"`
	Next string `json:"next_cursor"`
}

// List returns a page of runs, newest (highest seq) first. Pages never
// skip or repeat a run, also while runs are submitted: a page continues
// below the last seq of the previous one, and new runs get higher seqs.
func (c *Client) List(ctx context.Context, o ListOptions) (Page, error) {
	f := storage.RunFilter{Group: o.Group, State: storage.State(o.State), Limit: o.Limit}
	if o.Cursor != "" {
		cf, err := storage.ParseCursor(o.Cursor)
		if err != nil {
			return Page{}, err
		}
		if (o.Group != "" && o.Group != cf.Group) || (o.State != "" && o.State != string(cf.State)) {
			return Page{}, fmt.Errorf("client: list: the cursor continues a listing of group %q state %q, not group %q state %q: %w",
				cf.Group, cf.State, o.Group, o.State, ErrInvalid)
		}
		f.Group, f.State, f.Below = cf.Group, cf.State, cf.Below
	}
	switch {
	case f.Limit == 0:
		f.Limit = DefaultListLimit
	case f.Limit < 0 || f.Limit > MaxListLimit:
		return Page{}, fmt.Errorf("client: list: limit %d outside 1..%d: %w", o.Limit, MaxListLimit, ErrInvalid)
	}
	if f.State != "" && !validState(f.State) {
		return Page{}, fmt.Errorf("client: list: state %q is not a run state: %w", f.State, ErrInvalid)
	}
	if f.Group != "" {
		if err := storage.ValidateName("group", f.Group); err != nil {
			return Page{}, err
		}
	}
	p, err := c.st.ListRunsPage(ctx, f)
	if err != nil {
		return Page{}, err
	}
	out := Page{Runs: make([]Run, 0, len(p.Runs)), Next: p.Cursor(f)}
	for _, r := range p.Runs {
		out.Runs = append(out.Runs, FromStorage(r))
	}
	return out, nil
}

func validState(s storage.State) bool {
	switch s {
	case storage.StateWaiting, storage.StateLaunched, storage.StateRunning, storage.StateStopping,
		storage.StateSucceeded, storage.StateFailed, storage.StateStopped, storage.StateDiscarded:
		return true
	}
	return false
}

// Group is a serial group's settings and counts.
type Group struct {
	Name      string `json:"name"`
	Policy    string `json:"policy"`
	MaxActive int    `json:"max_active"`
	Window    int    `json:"window"`
	// RetentionMS: -1 = the namespace default, 0 = forever.
	RetentionMS int64 `json:"retention_ms"`
	Waiting     int   `json:"waiting"`
	Active      int   `json:"active"`
	Version     int64 `json:"version"`
}

func groupOf(g storage.Group) Group {
	w := g.Window
	if w == 0 {
		w = storage.DefaultWindow
	}
	ret := g.Retention.Milliseconds()
	if g.Retention < 0 {
		ret = -1
	}
	return Group{Name: g.Name, Policy: g.Policy, MaxActive: g.MaxActive, Window: w, RetentionMS: ret,
		Waiting: g.Waiting, Active: g.Active, Version: g.Version}
}

// Group reads a group (ErrNotFound).
func (c *Client) Group(ctx context.Context, name string) (Group, error) {
	g, err := c.st.GetGroup(ctx, name)
	if err != nil {
		return Group{}, err
	}
	return groupOf(g), nil
}

// Groups lists the namespace's groups by name.
func (c *Client) Groups(ctx context.Context) ([]Group, error) {
	gs, err := c.st.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Group, 0, len(gs))
	for _, g := range gs {
		out = append(out, groupOf(g))
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
	// Retention: nil keeps it; 0 = forever; storage.RetentionDefault (-1)
	// = the namespace default.
	Retention *time.Duration `json:"-"`
}

// SetGroup creates or changes a group and returns it.
func (c *Client) SetGroup(ctx context.Context, name string, s GroupSettings) (Group, error) {
	g, err := c.st.SetGroupSettings(ctx, name, storage.GroupSettings{Policy: s.Policy, MaxActive: s.MaxActive, Window: s.Window, Retention: s.Retention})
	if err != nil {
		return Group{}, err
	}
	return groupOf(g), nil
}
