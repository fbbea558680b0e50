package storage

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

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
	// Require are the labels a worker must carry to take the group's runs
	// (GroupSettings.Require), sorted by key.
	Require []abi.Label
	// SameWorker: each run's slots all on one worker (GroupSettings.SameWorker).
	SameWorker bool
	// Prefer are the labels a worker had better carry (GroupSettings.Prefer),
	// sorted by key.
	Prefer []abi.Preference
	// WakeAt is when the group's policy asked to be decided again (zero:
	// no pending wake).
	WakeAt time.Time
}

// Bounds of a group's settings and of what one decision reads.
const (

	// DrainChunk is the number of covered runs one drain script discards.
	DrainChunk = 256
	// decisionsKept is how many of its latest decisions a group keeps
	// (GroupDecisions).
	decisionsKept = 20
)

// Retry is a run's retry policy: up to MaxAttempts attempts; attempt n+1
// is due min(Cap, Base·2^(n-1)) after attempt n failed, half of that
// fixed and half random (equal jitter). A STOPPED or DISCARDED run is
// never retried.
type Retry struct {
	MaxAttempts int           // 1..MaxAttempts (1: no retry); 0 = the group's, else 1
	Base, Cap   time.Duration // 0 = the group's, else DefaultRetryBase, DefaultRetryCap
}

// Bounds and defaults of runs in time.
const ()

// TimedOutReason is the reason of an attempt stopped at its timeout d.
func TimedOutReason(d time.Duration) string { return "timed out after " + d.String() }

// validate checks r (op names the caller); a zero Retry is valid.
func (r Retry) validate(op, what string) error {
	switch {
	case r.MaxAttempts < 0 || r.MaxAttempts > limits.MaxAttempts:
		return invalid(op, "%s: max attempts %d outside 1..%d", what, r.MaxAttempts, limits.MaxAttempts)
	case r.Base < 0 || (r.Base > 0 && r.Base < time.Millisecond) || r.Base > limits.MaxRetryCap:
		return invalid(op, "%s: retry backoff %v outside 1ms..%v", what, r.Base, limits.MaxRetryCap)
	case r.Cap < 0 || (r.Cap > 0 && r.Cap < time.Millisecond) || r.Cap > limits.MaxRetryCap:
		return invalid(op, "%s: retry backoff cap %v outside 1ms..%v", what, r.Cap, limits.MaxRetryCap)
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
		b = min(limits.DefaultRetryBase, c)
	}
	if c == 0 {
		c = max(limits.DefaultRetryCap, b)
	}
	return fmt.Sprintf("%d,%d", b.Milliseconds(), c.Milliseconds())
}

func validTimeout(op, what string, d time.Duration) error {
	if d < 0 || (d > 0 && d < time.Millisecond) || d > limits.MaxTimeout {
		return invalid(op, "%s: timeout %v outside 1ms..%v", what, d, limits.MaxTimeout)
	}
	return nil
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
	// Require (nil = keep; empty = none) are the labels a worker must carry
	// to take the group's runs (placement: every one must match; valid as
	// labels are, at most abi.MaxLabels). Runs launched from then on follow
	// them; a run already LAUNCHED or RUNNING keeps where it may go.
	Require []abi.Label
	// SameWorker (nil = keep) puts all the slots of each run launched from
	// then on on one worker (a run of k slots waits for a worker with k
	// free; it never holds slots for that).
	SameWorker *bool
	// Prefer (nil = keep; empty = none; at most abi.MaxLabels, weights 1
	// to 1000) are labels a worker had better carry to take the group's
	// runs launched from now on: soft (a worker without them still takes
	// them), weighted; a run's own preferences add to them.
	Prefer []abi.Preference
}

// RetentionDefault, as GroupSettings.Retention, returns a group to the
// namespace's default retention.
const RetentionDefault time.Duration = -1

// SetGroupSettings creates or updates a group: only the nonzero settings
// change. It bumps the version and marks the group dirty.
func (s *Store) SetGroupSettings(ctx context.Context, name string, gs GroupSettings) (Group, error) {
	const op = "set group"
	if err := limits.ValidateName("group", name); err != nil {
		return Group{}, err
	}
	if gs.Policy != "" {
		if err := limits.ValidateName("policy", gs.Policy); err != nil {
			return Group{}, err
		}
	}
	args, err := gs.scriptArgs(op, name, s.k.WorkEvents())
	if err != nil {
		return Group{}, err
	}
	k := s.k
	v, err := s.run(ctx, op, "set_group", []string{k.Groups(), k.Group(name), k.Dirty(), k.Waiting(name), k.Active(name), k.GroupGen(), k.Retire(),
		k.Delayed(name)}, args...)
	if err != nil {
		return Group{}, err
	}
	a, _ := v.([]any)
	return parseGroup(name, setGroupReply, a), nil
}

// scriptArgs checks every setting (the one place their ranges are
// checked: the CLI and the API hand them on) and returns set_group.lua's
// ARGV; work is the work channel.
func (gs GroupSettings) scriptArgs(op, name, work string) ([]any, error) {
	if gs.MaxActive < 0 || gs.MaxActive > limits.MaxMaxActive {
		return nil, invalid(op, "group %s: max_active %d is outside 1 to %d", name, gs.MaxActive, limits.MaxMaxActive)
	}
	if gs.Window < 0 || gs.Window > limits.MaxWindow {
		return nil, invalid(op, "group %s: window %d is outside 1 to %d", name, gs.Window, limits.MaxWindow)
	}
	ret := ""
	if r := gs.Retention; r != nil {
		switch {
		case *r == RetentionDefault:
			ret = "-1"
		case *r < 0:
			return nil, invalid(op, "group %s: retention %v is negative", name, *r)
		case *r > 0 && *r < time.Millisecond:
			return nil, invalid(op, "group %s: retention %v is below 1ms", name, *r)
		default:
			ret = strconv.FormatInt(r.Milliseconds(), 10)
		}
	}
	timeout, maxa, backoff := "", "", ""
	if d := gs.RunTimeout; d != nil {
		if err := validTimeout(op, "group "+name, *d); err != nil {
			return nil, err
		}
		timeout = strconv.FormatInt(d.Milliseconds(), 10)
	}
	if r := gs.Retry; r != nil {
		if err := r.validate(op, "group "+name); err != nil {
			return nil, err
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
	req := ""
	if gs.Require != nil {
		ls, err := limits.NormalizeLabels("requirements", gs.Require, abi.MaxLabels)
		if err != nil {
			return nil, invalid(op, "group %s: %v", name, err)
		}
		req = "-"
		if len(ls) > 0 {
			req = encodeLabels(ls)
		}
	}
	same := ""
	if gs.SameWorker != nil {
		same = "0"
		if *gs.SameWorker {
			same = "1"
		}
	}
	pref := ""
	if gs.Prefer != nil {
		ps, err := limits.NormalizePreferences(gs.Prefer)
		if err != nil {
			return nil, invalid(op, "group %s: %v", name, err)
		}
		pref = "-"
		if len(ps) > 0 {
			pref = encodeLabels(preferLabels(ps))
		}
	}
	args := []any{name, gs.Policy, gs.MaxActive, gs.Window, ret, work, timeout, maxa, backoff, mode, abi.MaxParams, req, same, pref}
	if mode != "" {
		if len(gs.Params) > abi.MaxParams {
			return nil, invalid(op, "group %s: %d policy parameters, at most %d", name, len(gs.Params), abi.MaxParams)
		}
		seen := map[string]bool{}
		for _, p := range gs.Params {
			if err := limits.ValidLabel(p.Key, p.Value); err != nil {
				return nil, invalid(op, "group %s: parameter %s", name, strings.TrimPrefix(err.Error(), "label "))
			}
			if seen[p.Key] {
				return nil, invalid(op, "group %s: parameter %s given twice", name, p.Key)
			}
			seen[p.Key] = true
			args = append(args, p.Key, p.Value)
		}
	}
	return args, nil
}

// The group hash's fields as each reader gets them, in order: what
// set_group.lua returns (waiting, active and delayed are its queues'
// counts), what getGroups reads, and the decision view _lib.lua's
// group_view reads for a snapshot. parseGroup decodes all three.
var (
	setGroupReply = []string{"policy", "max_active", "version", "waiting", "active", "window", "retention_ms",
		"run_timeout_ms", "max_attempts", "backoff", "delayed", "params", "require", "same", "prefer"}
	groupReadFields = []string{"policy", "max_active", "version", "window", "retention_ms",
		"run_timeout_ms", "max_attempts", "backoff", "paused", "paused_at", "paused_by", "params", "wake_at", "require", "same", "prefer"}
	groupViewFields = []string{"policy", "max_active", "version", "window", "discard_below", "gen", "paused",
		"params", "wake_at"}
)

// parseGroup is the one decoder of a group hash: vals are the values of
// fields (missing ones read as unset).
func parseGroup(name string, fields []string, vals []any) Group {
	g := Group{Name: name}
	var timeout, maxa, backoff any
	runDefaults := false
	for i, f := range fields {
		if i >= len(vals) {
			break
		}
		v := vals[i]
		switch f {
		case "policy":
			g.Policy = str(v)
		case "max_active":
			g.MaxActive = int(toInt64(v))
		case "version":
			g.Version = toInt64(v)
		case "window":
			g.Window = int(toInt64(v))
		case "retention_ms":
			g.Retention = retention(v)
		case "run_timeout_ms":
			timeout, runDefaults = v, true
		case "max_attempts":
			maxa = v
		case "backoff":
			backoff = v
		case "paused":
			g.Paused = str(v) == "1"
		case "paused_at":
			g.PausedAt = msTime(toInt64(v))
		case "paused_by":
			g.PausedBy = str(v)
		case "params":
			g.Params = decodeLabels(str(v))
		case "require":
			g.Require = decodeLabels(str(v))
		case "same":
			g.SameWorker = str(v) == "1"
		case "prefer":
			_, _, g.Prefer = splitReq(decodeLabels(str(v)))
		case "wake_at":
			g.WakeAt = msTime(toInt64(v))
		case "discard_below":
			g.DiscardBelow = toInt64(v)
		case "gen":
			g.Gen = toInt64(v)
		case "waiting":
			g.Waiting = int(toInt64(v))
		case "active":
			g.Active = int(toInt64(v))
		case "delayed":
			g.Delayed = int(toInt64(v))
		}
	}
	if runDefaults {
		g.RunTimeout, g.Retry = groupRunDefaults(timeout, maxa, backoff)
	}
	return g
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

// GetGroup reads a group (ErrNotFound if absent).
func (s *Store) GetGroup(ctx context.Context, name string) (Group, error) {
	if err := limits.ValidateName("group", name); err != nil {
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
			cs[i] = cmds{p.HMGet(ctx, s.k.Group(n), groupReadFields...),
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
		g := parseGroup(n, groupReadFields, v)
		g.Waiting, g.Active, g.Delayed = int(cs[i].w.Val()), int(cs[i].a.Val()), int(cs[i].d.Val())
		out = append(out, g)
	}
	return out, nil
}

// dirtyGroups returns up to limit (<= 0: all) groups that may need a
// decision, read from the dirty set (no scan of all groups).
func (s *Store) dirtyGroups(ctx context.Context, limit int) ([]string, error) {
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
	if err := limits.ValidateName("group", group); err != nil {
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
