package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// The worker protocol: a worker written in any language registers over
// HTTP, and the API runs a worker of the Go library (host/worker) on its
// behalf. The library does what it does for a Go worker: it registers the
// slots in Redis, heartbeats, executes each assignment once per token,
// ends an execution on a stop, a timeout or a drain, and reports every
// outcome under its token. Its handler hands each run to the remote worker
// (an "assign" event on the worker's stream) and waits for the remote's
// report; a stop or a timeout sends a "stop" event. The remote worker
// heartbeats the API: one that misses its heartbeat TTL is given up, and
// the runs it held FAIL "worker lost: ..." (retried with attempts left, on
// any worker). docs/api.md "Workers over HTTP".

// Bounds of the worker protocol.
const (
	defaultRemoteHeartbeatTTL = 10 * time.Second
	minRemoteHeartbeatTTL     = time.Second
	maxRemoteHeartbeatTTL     = 5 * time.Minute
	// maxRemoteWorkers bounds the workers one API server serves.
	maxRemoteWorkers = 1000
	// lostRemoteReason starts the FAILED reason of a run whose HTTP worker
	// was given up (it missed its heartbeat TTL, or the server stopped).
	lostRemoteReason = "worker lost"
	// remoteStopGrace is how long a stopped run waits for the remote's
	// report before the library gives up on it.
	remoteStopGrace = 5 * time.Second
	// remoteStreamBuffer: frames queued per stream are at most twice this
	// (an assign and a stop per run); a stream that falls behind is ended.
	remoteStreamBuffer = 2048
)

type remoteWorkers struct {
	mu     sync.Mutex
	m      map[string]*remote // by identity
	ctx    context.Context    // the server's: ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newRemoteWorkers() *remoteWorkers {
	ctx, cancel := context.WithCancel(context.Background())
	return &remoteWorkers{m: map[string]*remote{}, ctx: ctx, cancel: cancel}
}

// close stops every remote worker: their runs in flight FAIL (retried
// with attempts left), and they deregister.
func (rs *remoteWorkers) close() {
	rs.mu.Lock()
	for _, r := range rs.m {
		r.kill(lostRemoteReason + ": the API server is shutting down")
	}
	rs.mu.Unlock()
	rs.wg.Wait()
	rs.cancel()
}

// remote is one registered remote worker.
type remote struct {
	id         string // its route key: "w-" and 16 random hex digits (an identity holds '#')
	identity   string // the library worker's identity stamp
	ns, owner  string // owner: who registered it (the token's label)
	ttl        time.Duration
	w          *worker.Worker
	cancel     context.CancelFunc // starts the drain
	done       chan struct{}      // closed when the library worker returned
	dead       chan struct{}      // closed by kill: its runs in flight fail now
	deadOnce   sync.Once
	deadReason string

	mu       sync.Mutex
	beat     time.Time
	inflight map[string]*assignment // by token
	draining bool
	sub      chan string   // the stream's frames (nil: no stream)
	subEnd   chan struct{} // closed to end that stream (a newer one, or it fell behind)
}

// assignment is a run handed to the remote worker.
type assignment struct {
	Run         string     `json:"run"`
	Token       string     `json:"token"`
	Group       string     `json:"group"`
	Payload     string     `json:"payload"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"max_attempts"`
	TimeoutMS   int64      `json:"timeout_ms"`
	Deadline    *time.Time `json:"deadline"`
	DurationMS  int64      `json:"duration_ms"`
	TraceParent string     `json:"traceparent,omitempty"` // the execution span's (W3C): the remote worker's spans are its children
	stopped     bool
	out         chan reportJSON
	run         *worker.Run // (progress goes through the library's rate limit)
}

// kill gives the remote worker up: every run in flight FAILS now with
// reason (retried with attempts left: the library reports it), and the
// worker drains and deregisters.
func (r *remote) kill(reason string) {
	r.deadOnce.Do(func() {
		r.deadReason = reason
		close(r.dead)
	})
	r.cancel()
}

// send queues frame on the stream (r.mu held): O(1) a frame. A stream
// that fell behind a full buffer is ended; the worker reconnects and gets
// every assignment not yet reported again.
func (r *remote) send(frame string) {
	if r.sub == nil {
		return
	}
	select {
	case r.sub <- frame:
	default:
		close(r.subEnd)
		r.sub, r.subEnd = nil, nil
	}
}

func assignFrame(a *assignment) string {
	b, _ := json.Marshal(a)
	return "event: assign\ndata: " + string(b) + "\n\n"
}

func stopFrame(a *assignment) string {
	b, _ := json.Marshal(map[string]string{"run": a.Run, "token": a.Token})
	return "event: stop\ndata: " + string(b) + "\n\n"
}

const drainFrame = "event: drain\ndata: {}\n\n"

// Handle is the library worker's handler: one call per assignment token.
func (r *remote) Handle(ctx context.Context, run *worker.Run) (string, error) {
	a := &assignment{Run: run.ID, Token: run.Token, Group: run.Group, Payload: run.Payload, Attempt: run.Attempt,
		MaxAttempts: run.MaxAttempts, TimeoutMS: run.Timeout.Milliseconds(), DurationMS: run.Duration.Milliseconds(),
		TraceParent: run.TraceParent, out: make(chan reportJSON, 1), run: run}
	if !run.Deadline.IsZero() {
		d := run.Deadline.UTC()
		a.Deadline = &d
	}
	r.mu.Lock()
	r.inflight[a.Token] = a
	r.send(assignFrame(a))
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inflight, a.Token)
		r.mu.Unlock()
	}()
	select {
	case rep := <-a.out:
		return rep.apply(run)
	case <-r.dead:
		return "", errors.New(r.deadReason)
	case <-ctx.Done():
	}
	// stopped, timed out or drained: tell the remote, give it the grace
	// to end the handler (the library reports the stop's outcome)
	r.mu.Lock()
	if r.inflight[a.Token] != nil {
		a.stopped = true
		r.send(stopFrame(a))
	}
	r.mu.Unlock()
	t := time.NewTimer(remoteStopGrace)
	defer t.Stop()
	select {
	case rep := <-a.out:
		return rep.apply(run)
	case <-r.dead:
		return "", errors.New(r.deadReason)
	case <-t.C:
		return "", ctx.Err()
	}
}

// watch stops the worker when its heartbeats stop (every ttl/4).
func (r *remote) watch(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(r.ttl / 4)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		late := time.Since(r.beat) > r.ttl
		r.mu.Unlock()
		if late {
			log.Warn("remote worker missed its heartbeat TTL: stopping it", "worker", r.id, "identity", r.identity, "ttl", r.ttl)
			r.kill(fmt.Sprintf("%s: the HTTP worker missed its heartbeat TTL (%v)", lostRemoteReason, r.ttl))
			return
		}
	}
}

type workerRegisterJSON struct {
	// Name goes into the worker's identity (default "http").
	Name string `json:"name"`
	// Slots it executes at once (default 1).
	Slots int `json:"slots"`
	// Labels it carries and Groups it serves (placement).
	Labels map[string]string `json:"labels"`
	Groups []string          `json:"groups"`
	// HeartbeatTTLMS: it heartbeats at least once per TTL (default 10 s).
	HeartbeatTTLMS int64 `json:"heartbeat_ttl_ms"`
	// DrainTimeoutMS bounds a drain's wait for its runs (default 30 s).
	DrainTimeoutMS int64 `json:"drain_timeout_ms"`
}

type workerJSON struct {
	ID             string            `json:"id"`
	Identity       string            `json:"identity"`
	Slots          int               `json:"slots"`
	Labels         map[string]string `json:"labels,omitempty"`
	Groups         []string          `json:"groups,omitempty"`
	HeartbeatTTLMS int64             `json:"heartbeat_ttl_ms"`
	Draining       bool              `json:"draining"`
	InFlight       int               `json:"in_flight"`
}

func (r *remote) view(slots int, labels map[string]string, groups []string) workerJSON {
	r.mu.Lock()
	defer r.mu.Unlock()
	return workerJSON{ID: r.id, Identity: r.identity, Slots: slots, Labels: labels, Groups: groups, HeartbeatTTLMS: r.ttl.Milliseconds(),
		Draining: r.draining, InFlight: len(r.inflight)}
}

// registerWorker starts a library worker for a remote one.
func (s *Server) registerWorker(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	var body workerRegisterJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if body.Name == "" {
		body.Name = "http"
	}
	if strings.ContainsAny(body.Name, "#{},| \t\r\n") || len(body.Name) > 64 {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "name %q: at most 64 bytes, no '#', '{', '}', ',', '|' or whitespace", body.Name)
	}
	if body.Slots == 0 {
		body.Slots = 1
	}
	if body.Slots < 1 || body.Slots > limits.MaxRunSlots {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "slots %d: want 1 to %d", body.Slots, limits.MaxRunSlots)
	}
	ttl := time.Duration(body.HeartbeatTTLMS) * time.Millisecond
	if ttl == 0 {
		ttl = defaultRemoteHeartbeatTTL
	}
	if ttl < minRemoteHeartbeatTTL || ttl > maxRemoteHeartbeatTTL {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "heartbeat_ttl_ms %d: want %d to %d", body.HeartbeatTTLMS,
			minRemoteHeartbeatTTL.Milliseconds(), maxRemoteHeartbeatTTL.Milliseconds())
	}
	if body.DrainTimeoutMS < 0 {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "drain_timeout_ms %d is negative", body.DrainTimeoutMS)
	}
	rs := s.remotes
	rs.mu.Lock()
	n := len(rs.m)
	rs.mu.Unlock()
	if n >= maxRemoteWorkers {
		return 0, nil, errorf(http.StatusServiceUnavailable, "unavailable", "%d workers registered here, the most this server allows", n)
	}
	rw := &remote{ns: c.st.Namespace(), owner: c.who.who, ttl: ttl, beat: time.Now(), inflight: map[string]*assignment{},
		done: make(chan struct{}), dead: make(chan struct{})}
	lw, err := worker.New(r.Context(), worker.Config{Client: c.st.Redis(), Namespace: c.st.Namespace(), Advertise: body.Name,
		Slots: body.Slots, Labels: body.Labels, Groups: body.Groups, StopGrace: remoteStopGrace,
		DrainTimeout: time.Duration(body.DrainTimeoutMS) * time.Millisecond, Logger: s.log.With("component", "http-worker")})
	if err != nil {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "%s", strings.TrimPrefix(err.Error(), "worker: "))
	}
	lw.HandleDefault(rw)
	rw.w = lw
	var key [8]byte
	_, _ = rand.Read(key[:])
	rw.id = "w-" + hex.EncodeToString(key[:]) // (before the goroutines that read it)
	ctx, cancel := context.WithCancel(rs.ctx)
	rw.cancel = cancel
	ran := make(chan error, 1)
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		defer cancel()
		err := lw.Run(ctx)
		ran <- err
		close(rw.done)
		rs.mu.Lock()
		if rs.m[rw.id] == rw {
			delete(rs.m, rw.id)
		}
		rs.mu.Unlock()
	}()
	for rw.identity = lw.Identity(); rw.identity == ""; rw.identity = lw.Identity() {
		select {
		case err := <-ran:
			return 0, nil, fmt.Errorf("register worker: %w", err)
		case <-r.Context().Done():
			cancel()
			return 0, nil, r.Context().Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	rs.mu.Lock()
	rs.m[rw.id] = rw
	rs.mu.Unlock()
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		rw.watch(ctx, s.log)
	}()
	s.log.Info("remote worker registered", "worker", rw.id, "identity", rw.identity, "slots", body.Slots, "by", c.who.who)
	return http.StatusCreated, rw.view(body.Slots, body.Labels, body.Groups), nil
}

// remoteOf is the worker of the request's {w}, if c may act for it: the
// token that registered it, or an admin token.
func (s *Server) remoteOf(r *http.Request, c *call) (*remote, error) {
	id := r.PathValue("w")
	s.remotes.mu.Lock()
	rw := s.remotes.m[id]
	s.remotes.mu.Unlock()
	if rw == nil || rw.ns != c.st.Namespace() {
		return nil, errorf(http.StatusNotFound, "not_found", "worker %s is not registered here (it stopped, or missed its heartbeat TTL: register again)", id)
	}
	if c.who.scope != scopeAdmin && rw.owner != c.who.who {
		return nil, errorf(http.StatusForbidden, "forbidden", "worker %s was registered with another token", id)
	}
	return rw, nil
}

// heartbeat keeps a remote worker alive for its TTL.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	rw, err := s.remoteOf(r, c)
	if err != nil {
		return 0, nil, err
	}
	rw.mu.Lock()
	rw.beat = time.Now()
	rw.mu.Unlock()
	return http.StatusOK, rw.view(0, nil, nil), nil
}

// drainWorker starts a remote worker's drain: no new runs; the runs in
// flight go on until reported or its drain timeout; then it deregisters.
func (s *Server) drainWorker(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	rw, err := s.remoteOf(r, c)
	if err != nil {
		return 0, nil, err
	}
	rw.mu.Lock()
	if !rw.draining {
		rw.draining = true
		rw.send(drainFrame)
	}
	rw.beat = time.Now()
	rw.mu.Unlock()
	rw.cancel()
	return http.StatusAccepted, rw.view(0, nil, nil), nil
}

type reportJSON struct {
	Token    string `json:"token"`
	Result   string `json:"result"`
	Error    string `json:"error"`
	Output   string `json:"output"`
	ExitCode *int   `json:"exit_code"`
}

// apply gives the library the remote's outcome.
func (rep reportJSON) apply(run *worker.Run) (string, error) {
	if rep.Output != "" {
		run.SetOutput(rep.Output)
	}
	if rep.ExitCode != nil {
		run.SetExitCode(*rep.ExitCode)
	}
	if rep.Error != "" {
		return "", errors.New(rep.Error)
	}
	return rep.Result, nil
}

// take hands rep to the assignment of run under rep.Token (once per token).
func (rw *remote) take(run string, rep reportJSON) error {
	rw.mu.Lock()
	a := rw.inflight[rep.Token]
	if a == nil || a.Run != run {
		rw.mu.Unlock()
		return errorf(http.StatusConflict, "conflict", "run %s has no assignment %q on worker %s (reported already, stopped and given up, or not this worker's)", run, rep.Token, rw.id)
	}
	delete(rw.inflight, rep.Token) // one report per token
	rw.beat = time.Now()
	rw.mu.Unlock()
	a.out <- rep
	return nil
}

// report takes a remote worker's outcome of one assignment.
func (s *Server) report(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	rw, err := s.remoteOf(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body reportJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	run := r.PathValue("id")
	if err := rw.take(run, body); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"run": run, "token": body.Token, "accepted": true}, nil
}

type progressJSON struct {
	Token    string   `json:"token"`
	Fraction *float64 `json:"fraction"`
	Message  string   `json:"message"`
}

// progress takes a remote worker's progress of an assignment it holds:
// the library writes the latest at most once per worker.ProgressEvery.
func (s *Server) progress(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	rw, err := s.remoteOf(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body progressJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	f := -1.0
	if body.Fraction != nil {
		if *body.Fraction < 0 || *body.Fraction > 1 {
			return 0, nil, errorf(http.StatusBadRequest, "invalid", "fraction %v: want 0 to 1 (or leave it out)", *body.Fraction)
		}
		f = *body.Fraction
	}
	run := r.PathValue("id")
	rw.mu.Lock()
	a := rw.inflight[body.Token]
	rw.beat = time.Now()
	rw.mu.Unlock()
	if a == nil || a.Run != run {
		return 0, nil, errorf(http.StatusConflict, "conflict", "run %s has no assignment %q on worker %s", run, body.Token, rw.id)
	}
	a.run.Progress(f, body.Message)
	return http.StatusOK, map[string]any{"run": run, "accepted": true}, nil
}

// maxReportBatch bounds the reports of one POST .../reports.
const maxReportBatch = 1024

type reportsJSON struct {
	Reports []struct {
		Run string `json:"run"`
		reportJSON
	} `json:"reports"`
}

// reports takes several outcomes in one request (what finished together):
// each as report takes it; the refused ones are listed, not an error.
func (s *Server) reports(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	rw, err := s.remoteOf(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body reportsJSON
	if err := decodeBody(w, r, &body); err != nil {
		return 0, nil, err
	}
	if len(body.Reports) > maxReportBatch {
		return 0, nil, errorf(http.StatusBadRequest, "invalid", "%d reports, at most %d a request", len(body.Reports), maxReportBatch)
	}
	type refusal struct {
		Run   string `json:"run"`
		Token string `json:"token"`
		Error string `json:"error"`
	}
	refused := []refusal{}
	for _, rep := range body.Reports {
		if err := rw.take(rep.Run, rep.reportJSON); err != nil {
			refused = append(refused, refusal{Run: rep.Run, Token: rep.Token, Error: err.Error()})
		}
	}
	return http.StatusOK, map[string]any{"accepted": len(body.Reports) - len(refused), "refused": refused}, nil
}

// assignments streams a remote worker's assignments and stop requests
// (server-sent events). On (re)connect every assignment not yet reported
// is sent again: a worker dedupes by token. A newer stream of the same
// worker ends this one.
func (s *Server) assignments(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	rw, err := s.remoteOf(r, c)
	if err != nil {
		return 0, nil, err
	}
	ch, end := make(chan string, 2*remoteStreamBuffer), make(chan struct{})
	rw.mu.Lock()
	if rw.subEnd != nil {
		close(rw.subEnd) // an older stream ends
	}
	rw.sub, rw.subEnd = ch, end
	rw.beat = time.Now()
	var first strings.Builder
	fmt.Fprintf(&first, ": worker %s (%s)\n\n", rw.id, rw.identity)
	for _, tok := range slices.Sorted(maps.Keys(rw.inflight)) {
		a := rw.inflight[tok]
		first.WriteString(assignFrame(a))
		if a.stopped {
			first.WriteString(stopFrame(a))
		}
	}
	if rw.draining {
		first.WriteString(drainFrame)
	}
	rw.mu.Unlock()
	defer func() {
		rw.mu.Lock()
		if rw.sub == ch {
			rw.sub, rw.subEnd = nil, nil
		}
		rw.mu.Unlock()
	}()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(frames string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a stalled reader is dropped
		if _, err := io.WriteString(w, frames); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		_ = rc.SetWriteDeadline(time.Time{})
		return true
	}
	if !write(first.String()) {
		return 0, nil, nil
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	var batch strings.Builder
	for {
		select {
		case <-r.Context().Done():
			return 0, nil, nil
		case <-s.remotes.ctx.Done():
			return 0, nil, nil
		case <-end:
			return 0, nil, nil
		case <-rw.done:
			// (what was queued first: the reports of a drain's last runs)
			for len(ch) > 0 {
				batch.WriteString(<-ch)
			}
			batch.WriteString("event: deregistered\ndata: {}\n\n")
			write(batch.String())
			return 0, nil, nil
		case f := <-ch:
			batch.Reset()
			batch.WriteString(f)
			for len(ch) > 0 && batch.Len() < 64<<10 { // one flush for what is queued
				batch.WriteString(<-ch)
			}
			if !write(batch.String()) {
				return 0, nil, nil
			}
		case <-ping.C:
			if !write(": ping\n\n") {
				return 0, nil, nil
			}
		}
	}
}
