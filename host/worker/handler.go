package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
	"github.com/wasmsched/wasmsched/storage"
)

// A Handler executes runs: Handle returns the run's result (stored on the
// run, at most MaxResult bytes) or an error (the run is FAILED with its
// message; retried if it has attempts left). ctx is cancelled when the run
// must end early: an operator's or a policy's stop, its timeout, the end
// of a drain, or the worker losing its slots; the handler should return
// soon after (the worker waits the stop grace, then gives up on it). A
// panic fails the run with its message.
type Handler interface {
	Handle(ctx context.Context, r *Run) (result string, err error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, r *Run) (string, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, r *Run) (string, error) { return f(ctx, r) }

// MaxResult bounds a handler's result (a larger one fails the run).
const MaxResult = limits.MaxResult

// MaxOutput bounds the output kept on a run (SetOutput keeps the tail).
const MaxOutput = limits.MaxOutput

// InterruptedReason is the reason of a run still in flight when a drain
// ended (retried if it has attempts left).
const InterruptedReason = "interrupted by worker shutdown"

// LostContactReason is the reason of a run the worker stopped because its
// heartbeat could not be written for longer than its TTL: the leader may
// have reaped the worker and placed the run's slots elsewhere, so the
// worker gives the run up rather than risk running it twice (reported
// FAILED; retried with attempts left).
const LostContactReason = "worker lost contact with Redis for longer than its heartbeat TTL"

// AlreadyExecutedReason is the FAILED reason of an assignment a worker
// refuses to start because it already executed it (or a later one on the
// same slot) and does not know the outcome: the store handed it back after
// losing what happened (a Redis failover). It is never run twice by one
// worker; with attempts left the run is retried under a new token.
const AlreadyExecutedReason = "already executed by this worker before the store lost it (Redis failover?); not run twice"

// Run is what a handler gets of the run it executes.
type Run struct {
	ID, Group, Namespace string
	// Token is the assignment's token: the worker runs one execution per
	// token, and its outcome is reported under it.
	Token string
	// Payload is what the submitter passed, as is.
	Payload string
	// Attempt is this attempt's number (1 first), of MaxAttempts.
	Attempt, MaxAttempts int
	// Timeout is the attempt's timeout (0: none); Deadline when it ends
	// (zero: none); ctx is cancelled then.
	Timeout  time.Duration
	Deadline time.Time
	// Duration is the run's submitted duration (what Simulate sleeps).
	Duration time.Duration
	// TraceParent is the W3C traceparent of the attempt's execution span
	// (the handler's context carries the span; "" when the run was
	// submitted without a trace): Exec hands it to the program as
	// TRACEPARENT.
	TraceParent string

	mu       sync.Mutex
	output   string
	exitCode *int
	prog     *progress
}

// ProgressEvery is the least time between two progress writes of one run:
// a handler may call Progress as often as it likes; the worker writes the
// latest at most this often (one Redis call).
const ProgressEvery = time.Second

// Progress reports how far the attempt is: fraction from 0 to 1 (-1: not
// known) and a short message (cut to 256 bytes). run show, the API, watches
// and the web UI show the latest; the worker writes it at most once per
// ProgressEvery, in the background.
func (r *Run) Progress(fraction float64, msg string) {
	p := r.prog
	if p == nil {
		return
	}
	if fraction != -1 {
		fraction = min(max(fraction, 0), 1)
	}
	if len(msg) > limits.MaxProgressMessage {
		msg = strings.ToValidUTF8(msg[:limits.MaxProgressMessage], "")
	}
	msg = strings.Map(func(c rune) rune {
		if c < 0x20 {
			return ' '
		}
		return c
	}, msg)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f, p.msg = fraction, msg
	if p.pending || p.done {
		return
	}
	if wait := ProgressEvery - time.Since(p.last); wait > 0 {
		p.pending = true
		p.timer = time.AfterFunc(wait, p.flush)
		return
	}
	p.last = time.Now()
	go p.send(fraction, msg)
}

// progress rate-limits a run's progress writes.
type progress struct {
	mu      sync.Mutex
	send    func(fraction float64, msg string)
	last    time.Time
	pending bool
	done    bool
	f       float64
	msg     string
	timer   *time.Timer
}

func (p *progress) flush() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	f, m := p.f, p.msg
	p.pending, p.last = false, time.Now()
	p.mu.Unlock()
	p.send(f, m)
}

// stop drops a progress not yet written (the attempt ended).
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
	}
}

// SetOutput records what the attempt printed (its last MaxOutput bytes are
// kept on the run).
func (r *Run) SetOutput(s string) {
	if len(s) > MaxOutput {
		s = s[len(s)-MaxOutput:]
	}
	r.mu.Lock()
	r.output = s
	r.mu.Unlock()
}

// SetExitCode records the attempt's exit code on the run.
func (r *Run) SetExitCode(code int) {
	r.mu.Lock()
	r.exitCode = &code
	r.mu.Unlock()
}

func (r *Run) outcome() (string, *int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.output, r.exitCode
}

func runOf(run storage.Run, ns string) *Run {
	r := &Run{ID: run.ID, Group: run.Group, Namespace: ns, Payload: run.Payload, Attempt: max(run.Attempt, 1),
		MaxAttempts: max(run.MaxAttempts, 1), Timeout: run.Timeout, Duration: run.Duration}
	if run.Timeout > 0 {
		r.Deadline = time.Now().Add(run.Timeout)
	}
	return r
}

// SimulateFailPayload is the payload that makes a simulated run FAILED.
const SimulateFailPayload = "fail"

type simulateHandler struct{}

// Simulate is the handler of `worker --simulate`: a run takes its
// submitted Duration, then SUCCEEDS; a payload of exactly "fail"
// (SimulateFailPayload) makes it FAILED after that Duration.
func Simulate() Handler { return simulateHandler{} }

func (simulateHandler) Handle(ctx context.Context, r *Run) (string, error) {
	t := time.NewTimer(r.Duration)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if r.Payload == SimulateFailPayload {
		return "", errors.New(`simulated failure (payload "fail")`)
	}
	return "", nil
}

// DefaultExecEnvDeny are the environment variables an exec'd program does
// not inherit from the worker (shell patterns, path.Match): the Redis URL
// (it may carry a password) and the API's token file.
var DefaultExecEnvDeny = []string{"WASMSCHED_REDIS", "WASMSCHED_API_TOKENS", "REDISCLI_AUTH"}

// ExecConfig is what Exec runs.
type ExecConfig struct {
	Program string
	Args    []string
	// StopGrace is the time between SIGTERM and SIGKILL when the run's
	// context ends (default DefaultStopGrace).
	StopGrace time.Duration
	// EnvDeny are patterns of the worker's environment variables the
	// program does not get (nil: DefaultExecEnvDeny; empty: none).
	EnvDeny []string
	// Logger gets the program's stdout and stderr line by line (default
	// slog.Default()).
	Logger *slog.Logger
}

type execHandler struct {
	prog  string
	args  []string
	grace time.Duration
	log   *slog.Logger
	env   []string
}

// Exec is the handler of `worker --exec`: it runs the program in its own
// process group with the worker's environment (minus EnvDeny) plus
// WASMSCHED_RUN_ID, WASMSCHED_GROUP, WASMSCHED_PAYLOAD, WASMSCHED_NAMESPACE
// and WASMSCHED_ATTEMPT; exit 0 is success, anything else an error with
// the exit status, and the exit code and the last MaxOutput bytes of
// stdout and stderr go on the run. When the run's context ends it sends
// SIGTERM to the process group and SIGKILL after StopGrace. The program
// is checked now: one that does not exist or is not executable is an
// error.
func Exec(c ExecConfig) (Handler, error) {
	p, err := exec.LookPath(c.Program)
	if err != nil {
		return nil, fmt.Errorf("worker: exec %s: %w", c.Program, err)
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("worker: exec %s: not an executable file", c.Program)
	}
	for _, pat := range c.EnvDeny {
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("worker: exec env deny pattern %q: %w", pat, err)
		}
	}
	deny := c.EnvDeny
	if deny == nil {
		deny = DefaultExecEnvDeny
	}
	if c.StopGrace == 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &execHandler{prog: c.Program, args: c.Args, grace: c.StopGrace, log: c.Logger, env: execEnv(deny)}, nil
}

// execEnv is the worker's environment without the variables matching deny.
func execEnv(deny []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "TRACEPARENT" || k == "TRACESTATE" {
			continue // the worker's own trace is not the run's: each run gets its own
		}
		denied := false
		for _, pat := range deny {
			if ok, _ := path.Match(pat, k); ok {
				denied = true
				break
			}
		}
		if !denied {
			out = append(out, kv)
		}
	}
	return out
}

func (h *execHandler) Handle(ctx context.Context, r *Run) (string, error) {
	cmd := exec.Command(h.prog, h.args...)
	cmd.Env = append(append([]string(nil), h.env...),
		"WASMSCHED_RUN_ID="+r.ID,
		"WASMSCHED_GROUP="+r.Group,
		"WASMSCHED_PAYLOAD="+r.Payload,
		"WASMSCHED_NAMESPACE="+r.Namespace,
		"WASMSCHED_ATTEMPT="+strconv.Itoa(r.Attempt),
	)
	if tp := tracing.TraceParent(ctx); tp != "" {
		// the program's spans are children of the execution span (the
		// OpenTelemetry convention for a process's parent context)
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tp)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := h.log.With("run", r.ID, "group", r.Group)
	tail := &tailBuf{}
	// One writer for both streams: os/exec then gives the program one pipe
	// as stdout and stderr, so the output is kept in the order it was
	// written (two pipes are read by two goroutines, and a line on stderr
	// could come before an earlier one on stdout).
	out := &lineLogger{log: log, stream: "stdout+stderr", tail: tail}
	cmd.Stdout, cmd.Stderr = out, out
	// Bound the wait for output pipes held open by grandchildren that
	// escaped the process group.
	cmd.WaitDelay = h.grace
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %v", h.prog, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		log.Info("killing run process group", "pgid", pgid, "signal", "SIGTERM")
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(h.grace)
		select {
		case err = <-waited:
			t.Stop()
		case <-t.C:
			log.Warn("process group outlived the grace period", "pgid", pgid, "signal", "SIGKILL", "grace", h.grace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-waited
		}
		// Leftovers of the group (the leader exited on SIGTERM but a
		// child ignored it) are killed too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	out.flush()
	r.SetOutput(tail.String())
	if cmd.ProcessState != nil {
		r.SetExitCode(cmd.ProcessState.ExitCode())
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: the program exited 0 but left its output open.
		return "", nil
	case errors.As(err, &ee):
		return "", errors.New(ee.Error())
	}
	return "", err
}

// tailBuf keeps the last MaxOutput bytes written to it.
type tailBuf struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuf) add(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf) - MaxOutput; n > 0 {
		t.buf = append(t.buf[:0], t.buf[n:]...)
	}
}

func (t *tailBuf) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
