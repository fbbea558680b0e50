package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/storage"
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

// --- views ---

type leaderJSON struct {
	Identity string     `json:"identity"` // "" = no leader
	Epoch    int64      `json:"epoch"`
	Since    *time.Time `json:"since"`
}

type slotJSON struct {
	Index    int    `json:"index"`
	Run      string `json:"run,omitempty"`
	Task     int    `json:"task"`
	RunState string `json:"run_state,omitempty"`
}

type workerJSON struct {
	Identity string     `json:"identity"`
	Alive    bool       `json:"alive"`
	Expires  time.Time  `json:"expires"`
	Slots    []slotJSON `json:"slots"`
}

type slotsJSON struct {
	Workers  []workerJSON `json:"workers"`
	Free     int          `json:"free"`
	Assigned int          `json:"assigned"`
}

func (s *Server) leaderView(ctx context.Context, st *storage.Store) (leaderJSON, error) {
	li, err := st.Leader(ctx)
	if err != nil {
		return leaderJSON{}, err
	}
	out := leaderJSON{Identity: li.Identity, Epoch: li.Epoch}
	if !li.Since.IsZero() {
		t := li.Since.UTC()
		out.Since = &t
	}
	return out, nil
}

func slotsView(ctx context.Context, st *storage.Store) (slotsJSON, error) {
	v, err := st.Slots(ctx)
	if err != nil {
		return slotsJSON{}, err
	}
	out := slotsJSON{Workers: []workerJSON{}, Free: v.Free, Assigned: v.Assigned}
	for _, w := range v.Workers {
		wj := workerJSON{Identity: w.Identity, Alive: w.Alive, Expires: w.Expires.UTC(), Slots: []slotJSON{}}
		for _, sl := range w.Slots {
			wj.Slots = append(wj.Slots, slotJSON{Index: sl.Index, Run: sl.Run, Task: sl.Task, RunState: string(sl.RunState)})
		}
		out.Workers = append(out.Workers, wj)
	}
	return out, nil
}

func (s *Server) leader(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	v, err := s.leaderView(r.Context(), c.st)
	return http.StatusOK, v, err
}

func (s *Server) slots(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	v, err := slotsView(r.Context(), c.st)
	return http.StatusOK, v, err
}

// overview is the UI's first page: leader, workers and slot usage, groups.
func (s *Server) overview(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	ctx := r.Context()
	l, err := s.leaderView(ctx, c.st)
	if err != nil {
		return 0, nil, err
	}
	sl, err := slotsView(ctx, c.st)
	if err != nil {
		return 0, nil, err
	}
	gs, err := c.c.Groups(ctx)
	if err != nil {
		return 0, nil, err
	}
	waiting, active := 0, 0
	for _, g := range gs {
		waiting += g.Waiting
		active += g.Active
	}
	return http.StatusOK, map[string]any{"namespace": c.st.Namespace(), "leader": l, "slots": sl,
		"groups": len(gs), "waiting": waiting, "active": active}, nil
}

// --- groups ---

type decisionSummaryJSON struct {
	At             time.Time `json:"at"`
	ID             string    `json:"id"`
	Epoch          int64     `json:"epoch"`
	Policy         string    `json:"policy"`
	PolicyVersion  string    `json:"policy_version"`
	PolicyRegistry int       `json:"policy_registry"`
	Launched       int       `json:"launched"`
	Discarded      int       `json:"discarded"`
	Stopped        int       `json:"stopped"`
	DiscardBelow   int64     `json:"discard_below,omitempty"`
	// Reasons are the policy's reasons on the runs of the decision (from
	// the runs' decision records, those still present).
}

type groupDetailJSON struct {
	client.Group
	Active       []client.Run          `json:"active_runs"`
	Queue        []client.Run          `json:"queue"` // oldest first; a deep group: its window (oldest and newest)
	QueueTotal   int64                 `json:"queue_total"`
	Truncated    bool                  `json:"queue_truncated"`
	Decisions    []decisionSummaryJSON `json:"decisions"`
	Reasons      []reasonJSON          `json:"recent_reasons"`
	PolicyActive string                `json:"policy_active"` // the version that decides it now
}

type reasonJSON struct {
	Run    string    `json:"run"`
	Action string    `json:"action"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func (s *Server) listGroups(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	gs, err := c.c.Groups(r.Context())
	if err != nil {
		return 0, nil, err
	}
	type row struct {
		client.Group
		Latest *decisionSummaryJSON `json:"latest_decision,omitempty"`
	}
	names := make([]string, 0, len(gs))
	for _, g := range gs {
		names = append(names, g.Name)
	}
	if len(names) > storage.MaxGetRuns {
		names = names[:storage.MaxGetRuns] // bounded: the first groups by name carry their latest decision
	}
	latest, err := c.st.LatestDecisions(r.Context(), names) // one round trip for all
	if err != nil {
		return 0, nil, err
	}
	out := make([]row, 0, len(gs))
	for i, g := range gs {
		rw := row{Group: g}
		if i < len(latest) && latest[i] != nil {
			d := summary(*latest[i])
			rw.Latest = &d
		}
		out = append(out, rw)
	}
	return http.StatusOK, map[string]any{"groups": out}, nil
}

func summary(d storage.GroupDecisionRecord) decisionSummaryJSON {
	return decisionSummaryJSON{At: d.At.UTC(), ID: d.ID, Epoch: d.Epoch, Policy: d.Policy, PolicyVersion: d.PolicyVersion,
		PolicyRegistry: d.PolicyRegistry, Launched: d.Launched, Discarded: d.Discarded, Stopped: d.Stop, DiscardBelow: d.DiscardBelow}
}

func (s *Server) getGroup(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	ctx := r.Context()
	name := r.PathValue("g")
	g, err := c.c.Group(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	sn, err := c.st.Snapshot(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	out := groupDetailJSON{Group: g, Active: []client.Run{}, Queue: []client.Run{}, Decisions: []decisionSummaryJSON{}, Reasons: []reasonJSON{},
		QueueTotal: int64(sn.WaitingTotal), Truncated: sn.WaitingTotal > len(sn.Waiting)}
	ids := make([]string, 0, len(sn.Active))
	for _, a := range sn.Active {
		ids = append(ids, a.ID)
	}
	act, err := c.st.GetRuns(ctx, ids) // with their slot assignments
	if err != nil {
		return 0, nil, err
	}
	for _, a := range act {
		out.Active = append(out.Active, client.FromStorage(a))
		if a.Decision != nil {
			out.Reasons = append(out.Reasons, reasonJSON{Run: a.ID, Action: string(a.Decision.Action), Reason: a.Decision.Reason, At: a.Decision.At.UTC()})
		}
	}
	for _, w := range sn.Waiting {
		out.Queue = append(out.Queue, client.FromStorage(w))
	}
	ds, err := c.st.GroupDecisions(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	for _, d := range ds {
		out.Decisions = append(out.Decisions, summary(d))
	}
	if pol, err := host.CandidateFor(ctx, c.st, g.Policy); err == nil {
		out.PolicyActive = pol.Label + " " + pol.SHA256[:12]
	}
	return http.StatusOK, out, nil
}

type groupPutJSON struct {
	Policy      string `json:"policy"`
	MaxActive   int    `json:"max_active"`
	Window      int    `json:"window"`
	RetentionMS *int64 `json:"retention_ms"` // -1 = the namespace default, 0 = forever
}

func (s *Server) putGroup(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body groupPutJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	gs := client.GroupSettings{Policy: body.Policy, MaxActive: body.MaxActive, Window: body.Window}
	if body.RetentionMS != nil {
		d := time.Duration(*body.RetentionMS) * time.Millisecond
		if *body.RetentionMS < -1 {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "retention_ms %d: want -1 (the namespace default), 0 (forever) or > 0", *body.RetentionMS)
		}
		if *body.RetentionMS == -1 {
			d = storage.RetentionDefault
		}
		gs.Retention = &d
	}
	if body.Policy != "" {
		if _, err := host.ResolvePolicy(r.Context(), c.st, body.Policy); err != nil {
			return 0, nil, errorf(http.StatusUnprocessableEntity, "unprocessable", "policy %q: no built-in and no active version in namespace %s", body.Policy, c.st.Namespace())
		}
	}
	g, err := c.c.SetGroup(r.Context(), r.PathValue("g"), gs)
	return http.StatusOK, g, err
}

// --- runs ---

type submitJSON struct {
	ID         string `json:"id"`
	Slots      int    `json:"slots"`
	Priority   int    `json:"priority"`
	Payload    string `json:"payload"`
	DurationMS int64  `json:"duration_ms"`
}

// IdempotencyHeader carries a submit's idempotency key.
const IdempotencyHeader = "Idempotency-Key"

func (s *Server) submit(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body submitJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.DurationMS < 0 {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "duration_ms %d is negative", body.DurationMS)
	}
	run, replayed, err := c.c.SubmitReplay(r.Context(), r.PathValue("g"), client.SubmitOptions{ID: body.ID, Slots: body.Slots,
		Priority: body.Priority, Payload: body.Payload, Duration: time.Duration(body.DurationMS) * time.Millisecond,
		IdempotencyKey: r.Header.Get(IdempotencyHeader)})
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
	if o.Group != "" && o.Cursor == "" {
		if _, err := c.c.Group(r.Context(), o.Group); err != nil {
			return 0, nil, err
		}
	}
	p, err := c.c.List(r.Context(), o)
	return http.StatusOK, p, err
}

func (s *Server) getRun(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	run, err := c.c.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, storage.ErrNotFound) {
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

// acquire takes a decision slot (MaxConcurrentDecisions), or fails when
// the request ends first.
func (s *Server) acquire(ctx context.Context) (func(), error) {
	select {
	case s.decide <- struct{}{}:
		return func() { <-s.decide }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type explainJSON struct {
	Run       client.Run   `json:"run"`
	State     string       `json:"state"`
	Ahead     *int64       `json:"ahead,omitempty"`
	Waiting   *int64       `json:"waiting,omitempty"`
	MaxActive int          `json:"max_active,omitempty"`
	Active    []client.Run `json:"active,omitempty"`
	Policy    string       `json:"policy,omitempty"`
	InWindow  *bool        `json:"in_window,omitempty"`
	Now       string       `json:"now,omitempty"`
	NowReason string       `json:"now_reason,omitempty"`
	Why       string       `json:"why"`
}

func (s *Server) explain(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	release, err := s.acquire(r.Context())
	if err != nil {
		return 0, nil, err
	}
	defer release()
	ex, err := host.Explain(r.Context(), s.rt, c.st, r.PathValue("id"))
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil, errorf(http.StatusNotFound, "not_found", "run %s not found (expired or never existed)", r.PathValue("id"))
	}
	if err != nil {
		return 0, nil, err
	}
	out := explainJSON{Run: client.FromStorage(ex.Run), State: string(ex.Run.State), Why: ex.Why}
	if ex.Waiting {
		out.Ahead, out.Waiting, out.MaxActive, out.Policy, out.InWindow = &ex.Ahead, &ex.Total, ex.MaxActive, ex.Policy, &ex.InWindow
		out.Active = []client.Run{}
		for _, a := range ex.Active {
			out.Active = append(out.Active, client.FromStorage(a))
		}
		out.Now, out.NowReason = ex.Now, ex.NowReason
	}
	return http.StatusOK, out, nil
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
	if err := storage.ValidateName("policy", body.Policy); err != nil {
		return 0, nil, err
	}
	cand, err := host.CandidateFor(r.Context(), c.st, body.Policy)
	if err != nil {
		return 0, nil, err
	}
	release, err := s.acquire(r.Context())
	if err != nil {
		return 0, nil, err
	}
	defer release()
	res, err := host.DryRunGroup(r.Context(), s.rt, c.st, cand, r.PathValue("g"))
	return http.StatusOK, res, err
}

// --- policies ---

type policyVersionJSON struct {
	Version  int       `json:"version"`
	SHA256   string    `json:"sha256"`
	PushedAt time.Time `json:"pushed_at"`
	Who      string    `json:"who"`
	Note     string    `json:"note"`
	Deleted  bool      `json:"deleted,omitempty"`
}

type policyEventJSON struct {
	At      time.Time `json:"at"`
	Who     string    `json:"who"`
	Action  string    `json:"action"`
	Version int       `json:"version"`
	Note    string    `json:"note"`
}

type policyJSON struct {
	Name     string              `json:"name"`
	Kind     string              `json:"kind"`
	Active   int                 `json:"active"` // 0 = the built-in
	Builtin  bool                `json:"builtin"`
	Versions []policyVersionJSON `json:"versions"`
	History  []policyEventJSON   `json:"history"`
}

func (s *Server) listPolicies(_ http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	ps, err := c.st.ListPolicies(r.Context())
	if err != nil {
		return 0, nil, err
	}
	out := []policyJSON{}
	seen := map[string]bool{}
	builtin := map[string]bool{}
	for _, n := range host.BuiltinPolicies() {
		builtin[n] = true
	}
	for _, p := range ps {
		pj := policyJSON{Name: p.Name, Kind: p.Kind, Active: p.Active, Builtin: builtin[p.Name], Versions: []policyVersionJSON{}, History: []policyEventJSON{}}
		for _, v := range p.Versions {
			pj.Versions = append(pj.Versions, policyVersionJSON{Version: v.Version, SHA256: v.SHA256, PushedAt: v.PushedAt.UTC(), Who: v.Who, Note: v.Note, Deleted: v.Deleted})
		}
		for _, e := range p.History {
			pj.History = append(pj.History, policyEventJSON{At: e.At.UTC(), Who: e.Who, Action: e.Action, Version: e.Version, Note: e.Note})
		}
		seen[p.Name] = true
		out = append(out, pj)
	}
	for _, n := range host.BuiltinPolicies() {
		if !seen[n] {
			out = append(out, policyJSON{Name: n, Builtin: true, Versions: []policyVersionJSON{}, History: []policyEventJSON{}})
		}
	}
	return http.StatusOK, map[string]any{"policies": out}, nil
}

type activateJSON struct {
	Version int    `json:"version"`
	Note    string `json:"note"`
}

func (s *Server) activate(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body activateJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.Version < 1 {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "version %d: want a pushed version (>= 1; the built-in is not a registry version: roll back to reach the version before)", body.Version)
	}
	name := r.PathValue("name")
	if err := c.st.ActivatePolicy(r.Context(), name, body.Version, c.who.who, body.Note); err != nil {
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
	if _, err := c.st.RollbackPolicy(r.Context(), name, c.who.who, body.Note); err != nil {
		return 0, nil, err
	}
	return s.onePolicy(r.Context(), c, name)
}

func (s *Server) onePolicy(ctx context.Context, c *call, name string) (int, any, error) {
	p, err := c.st.GetPolicy(ctx, name)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"name": p.Name, "active": p.Active}, nil
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
		writeJSON(w, http.StatusOK, map[string]any{"scope": ScopeAdmin, "auth": false})
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
