package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
)

func (s *Server) listNamespaces(_ http.ResponseWriter, r *http.Request, _ *call) (int, any, error) {
	ns, err := s.namespaces(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"namespaces": ns}, nil
}

func (s *Server) whoami(_ http.ResponseWriter, _ *http.Request, c *call) (int, any, error) {
	return http.StatusOK, map[string]any{"scope": c.who.scope, "who": c.who.who, "auth": s.cfg.Tokens != nil}, nil
}

func (s *Server) leader(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	v, err := c.c.Leader(r.Context())
	return http.StatusOK, v, err
}

func (s *Server) slots(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	v, err := c.c.Slots(r.Context())
	return http.StatusOK, v, err
}

func (s *Server) lost(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	limit := 0
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 || n > limits.MaxLostReports {
			return 0, nil, fmt.Errorf("limit=%q: want 0..%d: %w", q, limits.MaxLostReports, errs.ErrInvalid)
		}
		limit = n
	}
	v, err := c.c.LostRuns(r.Context(), limit)
	if v == nil {
		v = []client.LostRun{}
	}
	return http.StatusOK, map[string]any{"lost": v}, err
}

// overviewJSON is the UI's first page: leader, workers and slot usage, groups.
type overviewJSON struct {
	Namespace string        `json:"namespace"`
	Leader    client.Leader `json:"leader"`
	Slots     client.Slots  `json:"slots"`
	Groups    int           `json:"groups"`
	Waiting   int           `json:"waiting"`
	Active    int           `json:"active"`
	// Allocation: the allocation policy and the slots in use per value of
	// its fair label (per group without one).
	Allocation client.AllocationStatus `json:"allocation"`
}

func (s *Server) overview(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	ctx := r.Context()
	l, err := c.c.Leader(ctx)
	if err != nil {
		return 0, nil, err
	}
	sl, err := c.c.Slots(ctx)
	if err != nil {
		return 0, nil, err
	}
	gs, err := c.c.Groups(ctx)
	if err != nil {
		return 0, nil, err
	}
	o := overviewJSON{Namespace: c.c.Namespace(), Leader: l, Slots: sl, Groups: len(gs)}
	for _, g := range gs {
		o.Waiting += g.Waiting
		o.Active += g.Active
	}
	if o.Allocation, err = allocationOf(ctx, c, ""); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, o, nil
}

// --- groups ---

func (s *Server) listGroups(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	gs, err := c.c.Groups(r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"groups": gs}, nil
}

func (s *Server) getGroup(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	g, err := c.c.Group(r.Context(), r.PathValue("g"))
	return http.StatusOK, g, err
}

type groupPutJSON struct {
	Policy    string `json:"policy"`
	MaxActive int    `json:"max_active"`
	Window    int    `json:"window"`
	// Retention: "default", "forever" or a duration ("36h", "7d"); "" keeps it.
	Retention string `json:"retention"`
	// The defaults of runs submitted without their own (absent: keep;
	// run_timeout_ms 0: none; max_attempts 1: no retries).
	RunTimeoutMS   *int64 `json:"run_timeout_ms"`
	MaxAttempts    *int   `json:"max_attempts"`
	RetryBackoffMS *int64 `json:"retry_backoff_ms"`
	RetryCapMS     *int64 `json:"retry_cap_ms"`
	// Params set the policy's parameters ("" removes one); with
	// replace_params they become all of them.
	Params        map[string]string `json:"params"`
	ReplaceParams bool              `json:"replace_params"`
	// Require: the labels a worker must carry (absent: keep; {}: none).
	Require map[string]string `json:"require"`
	// SameWorker: all of each run's slots on one worker (absent: keep).
	SameWorker *bool `json:"same_worker"`
	// Prefer: "key=value[:weight]" labels a worker had better carry
	// (absent: keep; []: none).
	Prefer []string `json:"prefer"`
}

// msField is a *_ms field of a request: absent 0, negative a 400 naming it.
func msField(name string, v *int64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 0 {
		return 0, errorf(http.StatusBadRequest, "invalid", "%s %d is negative", name, *v)
	}
	return time.Duration(*v) * time.Millisecond, nil
}

// retryOf reads a request's max_attempts, retry_backoff_ms and
// retry_cap_ms (nil: none given).
func retryOf(maxAttempts *int, backoffMS, capMS *int64) (*client.Retry, error) {
	if maxAttempts == nil && backoffMS == nil && capMS == nil {
		return nil, nil
	}
	r := &client.Retry{}
	if maxAttempts != nil {
		if *maxAttempts < 1 || *maxAttempts > limits.MaxAttempts {
			return nil, errorf(http.StatusBadRequest, "invalid", "max_attempts %d: want 1..%d", *maxAttempts, limits.MaxAttempts)
		}
		r.MaxAttempts = *maxAttempts
	}
	var err error
	if r.Backoff, err = msField("retry_backoff_ms", backoffMS); err != nil {
		return nil, err
	}
	if r.Cap, err = msField("retry_cap_ms", capMS); err != nil {
		return nil, err
	}
	return r, nil
}

func (s *Server) putGroup(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body groupPutJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	gs := client.GroupSettings{Policy: body.Policy, MaxActive: body.MaxActive, Window: body.Window,
		Params: body.Params, ReplaceParams: body.ReplaceParams, Require: body.Require, SameWorker: body.SameWorker,
		Prefer: body.Prefer}
	if body.RunTimeoutMS != nil {
		d, err := msField("run_timeout_ms", body.RunTimeoutMS)
		if err != nil {
			return 0, nil, err
		}
		gs.RunTimeout = &d
	}
	retry, err := retryOf(body.MaxAttempts, body.RetryBackoffMS, body.RetryCapMS)
	if err != nil {
		return 0, nil, err
	}
	if retry != nil && retry.MaxAttempts == 1 {
		retry = &client.Retry{} // no retries
	}
	gs.Retry = retry
	if body.Retention != "" {
		d, err := client.ParseRetention(body.Retention, true)
		if err != nil {
			return 0, nil, err
		}
		gs.Retention = &d
	}
	if body.Policy != "" {
		if err := limits.ValidateName("policy", body.Policy); err != nil {
			return 0, nil, err
		}
		if err := host.CheckGroupPolicy(r.Context(), c.st, body.Policy); err != nil {
			if errors.Is(err, host.ErrUnknownPolicy) || errors.Is(err, host.ErrNotSerial) {
				return 0, nil, errorf(http.StatusUnprocessableEntity, "unprocessable", "%s", err.Error())
			}
			return 0, nil, err
		}
	}
	if body.Policy != "" || body.Params != nil || body.ReplaceParams {
		err := s.in.CheckGroupChange(r.Context(), c.st, r.PathValue("g"), body.Policy, body.Params, body.ReplaceParams)
		if errors.Is(err, host.ErrInvalidParams) {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "params: %s (nothing written)", strings.TrimSuffix(err.Error(), ": "+host.ErrInvalidParams.Error()))
		} else if err != nil {
			return 0, nil, err
		}
	}
	g, err := c.c.SetGroup(r.Context(), r.PathValue("g"), gs)
	return http.StatusOK, g, err
}

// --- runs ---

type submitJSON struct {
	ID         string  `json:"id"`
	Slots      int     `json:"slots"`
	Priority   int     `json:"priority"`
	Payload    string  `json:"payload"`
	DurationMS int64   `json:"duration_ms"`
	NotBefore  *string `json:"not_before"` // RFC 3339
	// Labels: at most 16, {"key": "value"}.
	Labels map[string]string `json:"labels"`
	// Require: labels a worker must carry, on top of the group's.
	Require map[string]string `json:"require"`
	// SameWorker: all of the run's slots on one worker.
	SameWorker bool `json:"same_worker"`
	// Prefer: "key=value[:weight]" labels a worker had better carry, on
	// top of the group's.
	Prefer []string `json:"prefer"`
	runTimeJSON
}

// runTimeJSON are a run's time settings in a submit or a schedule (absent:
// the group's defaults).
type runTimeJSON struct {
	TimeoutMS      *int64 `json:"timeout_ms"`
	MaxAttempts    *int   `json:"max_attempts"`
	RetryBackoffMS *int64 `json:"retry_backoff_ms"`
	RetryCapMS     *int64 `json:"retry_cap_ms"`
}

// settings checks them (a 400 naming the field): the timeout (0: none
// given) and the retry policy (zero: none given).
func (b runTimeJSON) settings() (time.Duration, client.Retry, error) {
	if b.TimeoutMS != nil && *b.TimeoutMS == 0 {
		return 0, client.Retry{}, errorf(http.StatusBadRequest, "invalid", "timeout_ms 0: want > 0 (leave it out for none)")
	}
	timeout, err := msField("timeout_ms", b.TimeoutMS)
	if err != nil {
		return 0, client.Retry{}, err
	}
	retry, err := retryOf(b.MaxAttempts, b.RetryBackoffMS, b.RetryCapMS)
	if err != nil || retry == nil {
		return timeout, client.Retry{}, err
	}
	return timeout, *retry, nil
}

// idempotencyHeader carries a submit's idempotency key.
const idempotencyHeader = "Idempotency-Key"

func (s *Server) submit(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body submitJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.DurationMS < 0 {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "duration_ms %d is negative", body.DurationMS)
	}
	o := client.SubmitOptions{ID: body.ID, Slots: body.Slots,
		Priority: body.Priority, Payload: body.Payload, Duration: time.Duration(body.DurationMS) * time.Millisecond,
		IdempotencyKey: r.Header.Get(idempotencyHeader), Labels: body.Labels, Require: body.Require, SameWorker: body.SameWorker,
		Prefer: body.Prefer}
	if body.NotBefore != nil {
		t, err := time.Parse(time.RFC3339Nano, *body.NotBefore)
		if err != nil {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "not_before %q: want an RFC 3339 time (2026-12-24T06:00:00Z)", *body.NotBefore)
		}
		o.NotBefore = t
	}
	timeout, retry, err := body.settings()
	if err != nil {
		return 0, nil, err
	}
	o.Timeout, o.MaxAttempts, o.RetryBackoff, o.RetryCap = timeout, retry.MaxAttempts, retry.Backoff, retry.Cap
	// the caller's W3C trace context: the submit span's parent (an
	// invalid one is ignored, as W3C says: the run starts its own trace)
	ctx := tracing.ContextWith(r.Context(), r.Header.Get("traceparent"))
	run, replayed, err := c.c.SubmitReplay(ctx, r.PathValue("g"), o)
	if err != nil {
		return 0, nil, err
	}
	w.Header().Set("Location", "/api/v1/namespaces/"+c.st.Namespace()+"/runs/"+run.ID)
	if replayed {
		return http.StatusOK, run, nil
	}
	return http.StatusCreated, run, nil
}

func (s *Server) listRuns(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	q := r.URL.Query()
	o := client.ListOptions{Group: q.Get("group"), State: q.Get("state"), Cursor: q.Get("cursor")}
	for _, v := range q["label"] { // label=k=v, repeatable: runs with all of them
		l, err := limits.ParseLabel(v)
		if err != nil {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "label: %v", err)
		}
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[l.Key] = l.Value
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "limit %q is not a number", v)
		}
		if n == 0 {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "limit 0: want 1..%d", client.MaxListLimit)
		}
		o.Limit = n
	}
	// group is a filter: a group not made yet, or deleted with its runs
	// kept, lists what runs it has (none is an empty page, not a 404)
	p, err := c.c.List(r.Context(), o)
	return http.StatusOK, p, err
}

func (s *Server) getRun(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	run, err := c.c.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, errs.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, "not_found", "run %s not found (expired or never existed)", r.PathValue("id"))
	}
	return http.StatusOK, run, err
}

type stopJSON struct {
	Reason string `json:"reason"`
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body stopJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.Reason == "" {
		body.Reason = "stopped by " + c.who.who
	}
	run, err := c.c.Stop(r.Context(), r.PathValue("id"), body.Reason)
	return http.StatusOK, run, err
}

// retry puts a FAILED or STOPPED run back to WAITING (409 bad_state for
// any other).
func (s *Server) retry(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	run, err := c.c.Retry(r.Context(), r.PathValue("id"), c.who.who)
	return http.StatusOK, run, err
}

type groupRetryJSON struct {
	// State: FAILED (default) or STOPPED.
	State string `json:"state"`
	// Labels: only runs carrying all of them.
	Labels map[string]string `json:"labels"`
	// Since (RFC 3339): only runs that finished at or after it.
	Since *string `json:"since"`
	// Limit: at most this many (0: all).
	Limit int `json:"limit"`
}

// retryGroup retries a group's finished runs its body selects.
func (s *Server) retryGroup(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body groupRetryJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	o := client.RetryOptions{State: body.State, Labels: body.Labels, Limit: body.Limit, Who: c.who.who}
	if body.Since != nil {
		t, err := time.Parse(time.RFC3339Nano, *body.Since)
		if err != nil {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "since %q: want an RFC 3339 time", *body.Since)
		}
		o.Since = t
	}
	g := r.PathValue("g")
	n, err := c.c.RetryGroup(r.Context(), g, o)
	return http.StatusOK, map[string]any{"group": g, "runs": n}, err
}

// acquire takes a decision slot (maxConcurrentDecisions), or fails when
// the request ends first.
func (s *Server) acquire(ctx context.Context) (func(), error) {
	select {
	case s.decide <- struct{}{}:
		return func() { <-s.decide }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) explain(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	release, err := s.acquire(r.Context())
	if err != nil {
		return 0, nil, err
	}
	defer release()
	ex, err := s.in.Explain(r.Context(), c.st, r.PathValue("id"))
	if errors.Is(err, errs.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, "not_found", "run %s not found (expired or never existed)", r.PathValue("id"))
	}
	return http.StatusOK, ex, err
}

type dryRunReqJSON struct {
	Policy string `json:"policy"`
}

func (s *Server) dryRun(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body dryRunReqJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.Policy == "" {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "policy is required: a built-in or a pushed policy name")
	}
	if err := limits.ValidateName("policy", body.Policy); err != nil {
		return 0, nil, err
	}
	// a name that is no serial policy here is the body's fault (422, the
	// serial built-ins named), not a missing resource (404 is the group's)
	if err := host.CheckGroupPolicy(r.Context(), c.st, body.Policy); errors.Is(err, host.ErrUnknownPolicy) || errors.Is(err, host.ErrNotSerial) {
		return 0, nil, errorf(http.StatusUnprocessableEntity, "unprocessable", "%s", err.Error())
	} else if err != nil {
		return 0, nil, err
	}
	cand, err := host.ResolvePolicy(r.Context(), c.st, body.Policy)
	if err != nil {
		return 0, nil, err
	}
	release, err := s.acquire(r.Context())
	if err != nil {
		return 0, nil, err
	}
	defer release()
	res, err := s.in.DryRun(r.Context(), c.st, cand, r.PathValue("g"))
	return http.StatusOK, res, err
}

// series is GET .../series?group=G&window=D: the namespace's (or the
// group's) time series over the last D (default 1h, at most 24h).
func (s *Server) series(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	q := r.URL.Query()
	window := time.Hour
	if v := q.Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 24*time.Hour {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "window %q: want a duration in (0, 24h], e.g. 1h", v)
		}
		window = d
	}
	g := q.Get("group")
	if g != "" {
		if _, err := c.c.Group(r.Context(), g); err != nil {
			return 0, nil, err
		}
	}
	sr, err := c.c.Series(r.Context(), g, window)
	return http.StatusOK, sr, err
}

// --- policies ---

func (s *Server) listPolicies(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	ps, err := host.Policies(r.Context(), c.st)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"policies": ps}, nil
}

type activateJSON struct {
	// Version: a pushed version (>= 1), or 0: none (the embedded built-in
	// of a built-in name; no active version for another name)
	Version *int   `json:"version"`
	Note    string `json:"note"`
}

func (s *Server) activate(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body activateJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.Version == nil || *body.Version < 0 {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "version: want a pushed version (>= 1) or 0 (none: the built-in of a built-in name)")
	}
	name := r.PathValue("name")
	if err := s.in.CheckActivation(r.Context(), c.st, name, *body.Version); errors.Is(err, host.ErrInvalidParams) {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "activate %s %d refused, nothing written: %s", name, *body.Version,
			strings.TrimSuffix(err.Error(), ": "+host.ErrInvalidParams.Error()))
	} else if err != nil && !errors.Is(err, errs.ErrNotFound) {
		return 0, nil, err
	}
	if err := c.c.ActivatePolicy(r.Context(), name, *body.Version, c.who.who, body.Note); err != nil {
		return 0, nil, err
	}
	return s.onePolicy(r.Context(), c, name)
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body struct {
		Note string `json:"note"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	name := r.PathValue("name")
	if _, err := c.c.RollbackPolicy(r.Context(), name, c.who.who, body.Note); err != nil {
		return 0, nil, err
	}
	return s.onePolicy(r.Context(), c, name)
}

// onePolicy answers a registry change with the policy's record.
func (s *Server) onePolicy(ctx context.Context, c *call, name string) (int, any, error) {
	ps, err := host.Policies(ctx, c.st)
	if err != nil {
		return 0, nil, err
	}
	for _, p := range ps {
		if p.Name == name {
			return http.StatusOK, p, nil
		}
	}
	return 0, nil, errorf(http.StatusNotFound, "not_found", "policy %s not found", name)
}

// --- UI login ---

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	if s.cfg.Tokens == nil {
		writeJSON(w, http.StatusOK, map[string]any{"scope": scopeAdmin, "auth": false})
		return
	}
	tk, ok := s.cfg.Tokens.lookup(body.Token)
	if !ok {
		writeError(w, errorf(http.StatusUnauthorized, "unauthorized", "unknown token"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: body.Token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int((30 * 24 * time.Hour).Seconds())})
	writeJSON(w, http.StatusOK, map[string]any{"scope": tk.scope, "auth": true})
}

func (s *Server) logout(w http.ResponseWriter, _ *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]any{})
}

// --- schedules ---

type scheduleJSON struct {
	Group    string `json:"group"`
	Cron     string `json:"cron"`
	TZ       string `json:"tz"`
	Payload  string `json:"payload"`
	Priority int    `json:"priority"`
	Slots    int    `json:"slots"`
	Paused   bool   `json:"paused"`
	runTimeJSON
}

func (s *Server) listSchedules(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	scs, err := c.c.Schedules(r.Context())
	return http.StatusOK, map[string]any{"schedules": scs}, err
}

func (s *Server) getSchedule(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	sc, err := c.c.Schedule(r.Context(), r.PathValue("name"))
	return http.StatusOK, sc, err
}

func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body scheduleJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	spec := client.ScheduleSpec{Group: body.Group, Cron: body.Cron, TZ: body.TZ, Payload: body.Payload, Priority: body.Priority,
		Slots: body.Slots, Paused: body.Paused}
	var err error
	if spec.Timeout, spec.Retry, err = body.settings(); err != nil {
		return 0, nil, err
	}
	sc, err := c.c.SetSchedule(r.Context(), r.PathValue("name"), spec)
	return http.StatusOK, sc, err
}

// scheduleAction is POST .../schedules/{name}/pause|resume and DELETE.
func (s *Server) scheduleAction(action string) func(http.ResponseWriter, *http.Request, *call) (int, any, error) {
	return func(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
		name := r.PathValue("name")
		var err error
		switch action {
		case "pause":
			err = c.c.PauseSchedule(r.Context(), name)
		case "resume":
			_, err = c.c.ResumeSchedule(r.Context(), name)
		default:
			if err = c.c.DeleteSchedule(r.Context(), name); err == nil {
				return http.StatusOK, map[string]any{"name": name, "deleted": true}, nil
			}
		}
		if err != nil {
			return 0, nil, err
		}
		sc, err := c.c.Schedule(r.Context(), name)
		return http.StatusOK, sc, err
	}
}

// --- group control ---

type controlJSON struct {
	Who    string `json:"who"`
	Reason string `json:"reason"`
	// Labels (discard, stop): only the runs carrying every one of them.
	Labels map[string]string `json:"labels"`
}

// groupAction is POST .../groups/{g}/pause|resume|discard|stop: it answers
// with the group, and for discard and stop how many runs it moved.
func (s *Server) groupAction(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
		var body controlJSON
		if err := decodeBody(w, r, &body); err != nil {
			return 0, nil, err
		}
		g := r.PathValue("g")
		n, err := 0, error(nil)
		switch action {
		case "pause":
			who := body.Who
			if who == "" {
				who = c.who.who
			}
			err = c.c.PauseGroup(r.Context(), g, who)
		case "resume":
			err = c.c.ResumeGroup(r.Context(), g)
		case "discard":
			n, err = c.c.DiscardWaiting(r.Context(), g, orString(body.Reason, "discarded by "+c.who.who), body.Labels)
		case "stop":
			n, err = c.c.StopActive(r.Context(), g, orString(body.Reason, "stopped by "+c.who.who), body.Labels)
		}
		if err != nil {
			return 0, nil, err
		}
		gr, err := c.c.Group(r.Context(), g)
		return http.StatusOK, map[string]any{"group": gr, "runs": n}, err
	}
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// --- allocation (namespace set --allocate) ---

// allocationOf is GET .../allocation (a client.AllocationStatus): the
// namespace's allocation policy and parameters, its capacity, the launched
// runs waiting for slots, and the slots in use per value of the fair label
// (per group without one); with ?group=G also that group's runs' slots per
// value of the fair label.
func allocationOf(ctx context.Context, c *call, group string) (client.AllocationStatus, error) {
	st, err := host.ReadAllocationStatus(ctx, c.st, group)
	if err != nil {
		return client.AllocationStatus{}, err
	}
	a, err := c.c.Allocation(ctx)
	if err != nil {
		return client.AllocationStatus{}, err
	}
	out := client.AllocationStatus{Allocation: a, Free: st.Free, Slots: st.Slots, Launched: st.Launched, By: "group", Usage: []client.SlotUsage{}}
	if a.FairLabel != "" {
		out.By = a.FairLabel
	}
	for _, u := range client.UsageOf(st.Usage) {
		if u.Key == a.FairLabel {
			out.Usage = append(out.Usage, u)
		}
	}
	if group != "" {
		out.Group = client.UsageOf(st.Group)
	}
	return out, nil
}

func (s *Server) getAllocation(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	g := r.URL.Query().Get("group")
	if g != "" {
		if err := limits.ValidateName("group", g); err != nil {
			return 0, nil, err
		}
	}
	v, err := allocationOf(r.Context(), c, g)
	return http.StatusOK, v, err
}

type allocationPutJSON struct {
	Policy    *string           `json:"policy"`     // absent: keep
	FairLabel *string           `json:"fair_label"` // absent: keep
	Weights   map[string]int    `json:"weights"`    // absent: keep; {} clears
	Params    map[string]string `json:"params"`     // merged; "" removes one
	Reset     bool              `json:"reset"`      // start from fifo, no parameters
}

func (s *Server) putAllocation(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body allocationPutJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	a := client.Allocation{Policy: limits.DefaultAllocation}
	if !body.Reset {
		var err error
		if a, err = c.c.Allocation(ctx); err != nil {
			return 0, nil, err
		}
	}
	if body.Policy != nil {
		a.Policy = host.AllocationPolicyName(*body.Policy)
		if err := limits.ValidateName("policy", a.Policy); err != nil {
			return 0, nil, err
		}
	}
	if body.FairLabel != nil {
		a.FairLabel = *body.FairLabel
	}
	if body.Weights != nil {
		a.Weights = body.Weights
	}
	for k, v := range body.Params {
		a.SetParam(k, v)
	}
	if err := host.CheckAllocationPolicy(ctx, c.st, a.Policy); err != nil {
		if errors.Is(err, host.ErrUnknownPolicy) || errors.Is(err, host.ErrNotAllocation) {
			return 0, nil, errorf(http.StatusUnprocessableEntity, "unprocessable", "%s", err.Error())
		}
		return 0, nil, err
	}
	if err := c.c.SetAllocation(ctx, a); err != nil {
		return 0, nil, err
	}
	v, err := allocationOf(ctx, c, "")
	return http.StatusOK, v, err
}
