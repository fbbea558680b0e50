package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
	"github.com/wasmsched/wasmsched/storage"
)

// stopReason is the reason recorded with a stop request (kept in the
// STOPPED report), or a generic one.
func (w *agent) stopReason(ctx context.Context, runID string) string {
	if r, err := w.Store.GetRun(ctx, runID); err == nil && r.Reason != "" {
		return r.Reason
	}
	return "stopped on request"
}

// startLocked starts executing the run of assignment s. w.mu is held.
// The run record comes with s (SlotState.Detail, read with the slots);
// only without it is it read here.
func (w *agent) startLocked(ctx context.Context, s storage.SlotState) {
	var run storage.Run
	if s.Detail != nil && s.Detail.ID == s.Run {
		run = *s.Detail
	} else {
		r, err := w.Store.GetRun(ctx, s.Run)
		if err != nil {
			w.Logger.Warn("cannot read assigned run; will retry", "run", s.Run, "err", err)
			return
		}
		run = r
	}
	w.mem.start(s.Token, slotKey(w.identity, s.Index), time.Now())
	if w.journal != nil {
		_, err := fmt.Fprintf(w.journal, "%s %s %d\n", s.Run, s.Token, max(run.Attempt, 1))
		if err == nil {
			err = w.journal.Sync()
		}
		if err != nil {
			w.Logger.Error("journal write failed", "run", s.Run, "err", err)
		}
	}
	e := newExecution(s.Run, s.Token, run.Group, run.Timeout)
	e.identity, e.slot = w.identity, s.Index
	w.running[s.Token] = e
	if run.Timeout > 0 {
		// The attempt's deadline, from its start here: stopped as an
		// operator stop would be, reported FAILED "timed out after D".
		e.deadline = time.AfterFunc(run.Timeout, func() { e.kill(killTimeout) })
	}
	log := w.Logger.With("run", s.Run, "token", s.Token, "group", run.Group)
	log.Info("run started", "mode", w.mode())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f := w.runHandler(e, run, log)
		if e.deadline != nil {
			e.deadline.Stop()
		}
		e.cancel()
		f.group, f.identity = run.Group, e.identity
		w.done <- f
	}()
}

func (w *agent) mode() string {
	switch w.def.(type) {
	case *execHandler:
		return "exec"
	case simulateHandler:
		return "simulate"
	}
	return "handler"
}

// runHandler runs the run's handler with the execution's context and
// turns what it returned into the outcome to report: a kill's reason wins
// (stop, timeout, shutdown, lost), then an error or a panic (FAILED), then
// a result within MaxResult (SUCCEEDED). A handler that does not return
// within StopGrace + 2 s of its context ending is abandoned.
func (w *agent) runHandler(e *execution, run storage.Run, log *slog.Logger) *finished {
	r := runOf(run, w.Store.Namespace())
	r.Token = e.token
	ctx, span := w.startSpan(e, run)
	r.TraceParent = tracing.Format(span.SpanContext())
	r.prog = &progress{send: func(f float64, msg string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := w.Store.SetProgress(ctx, e.identity, e.run, e.token, f, msg); err != nil {
			log.Debug("progress not written", "err", err)
		}
	}}
	defer r.prog.stop()
	h := w.handlerFor(run.Group)
	type ret struct {
		res string
		err error
	}
	done := make(chan ret, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				log.Error("handler panicked", "panic", p)
				done <- ret{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		res, err := h.Handle(ctx, r)
		done <- ret{res, err}
	}()
	var out ret
	select {
	case out = <-done:
	case <-e.ctx.Done():
		t := time.NewTimer(w.StopGrace + 2*time.Second)
		select {
		case out = <-done:
			t.Stop()
		case <-t.C:
			log.Warn("handler did not return after its context ended; abandoning it", "grace", w.StopGrace)
		}
	}
	var f *finished
	switch why := e.reason(); {
	case why != 0:
		f = why.result(e)
	case out.err != nil:
		f = &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: out.err.Error()}
	case len(out.res) > limits.MaxResult:
		f = &finished{run: e.run, token: e.token, outcome: storage.StateFailed,
			reason: fmt.Sprintf("result is %d bytes, at most %d", len(out.res), limits.MaxResult)}
	default:
		f = &finished{run: e.run, token: e.token, outcome: storage.StateSucceeded, result: out.res}
	}
	f.output, f.exitCode = r.outcome()
	f.span, f.at = span, time.Now()
	return f
}

// startSpan starts the attempt's execution span, a child of the run's
// submit span (storage.Run.TraceParent; a root span when it has none),
// and returns the handler's context, which carries it.
func (w *agent) startSpan(e *execution, run storage.Run) (context.Context, trace.Span) {
	tr := w.tracer
	if tr == nil {
		tr = tracing.Tracer(nil)
	}
	ctx := tracing.ContextWith(e.ctx, run.TraceParent)
	if !trace.SpanContextFromContext(ctx).IsSampled() && run.TraceParent != "" {
		// a parent that is not sampled: no span records (parent-based
		// sampling), so none is built; the handler gets the parent
		return tr.Start(ctx, tracing.SpanExecute)
	}
	return tr.Start(ctx, tracing.SpanExecute, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("wasmsched.namespace", w.Store.Namespace()), attribute.String("wasmsched.group", run.Group),
		attribute.String("wasmsched.run", run.ID), attribute.Int("wasmsched.attempt", max(run.Attempt, 1)),
		attribute.String("wasmsched.worker", e.identity), attribute.Int("wasmsched.slot", e.slot)))
}

// endSpans ends a finished execution's span once its report is settled:
// a "wasmsched.returned" event at the handler's return, a
// "wasmsched.report" event (how: written, lost, refused, dropped; the
// report's error) now, and the span now, with the outcome: the span is
// the attempt, its report included.
func (w *agent) endSpans(f *finished, how string, err error) {
	if f.span == nil || !f.span.IsRecording() {
		return
	}
	ev := []attribute.KeyValue{attribute.String("wasmsched.report", how)}
	if err != nil {
		ev = append(ev, attribute.String("error", err.Error()))
	}
	f.span.AddEvent("wasmsched.returned", trace.WithTimestamp(f.at))
	f.span.AddEvent(tracing.SpanReport, trace.WithAttributes(ev...))
	f.span.SetAttributes(attribute.String("wasmsched.outcome", string(f.outcome)), attribute.String("wasmsched.reason", f.reason))
	if f.outcome == storage.StateFailed {
		f.span.SetStatus(codes.Error, f.reason)
	}
	f.span.End()
}

// finish handles a finished execution: report it unless dropped.
func (w *agent) finish(ctx context.Context, f *finished) {
	if w.record(f) {
		w.retryReports(ctx)
	}
}

// killReason says why an execution is being killed.
type killReason int

const (
	killStop     killReason = iota + 1 // stop request: report STOPPED
	killDrop                           // assignment gone: do not report
	killShutdown                       // worker shutting down (a drain's end): report FAILED
	killLost                           // heartbeat lease may be lost: report FAILED
	killTimeout                        // the run's timeout passed: report FAILED "timed out"
)

func (k killReason) result(e *execution) *finished {
	switch k {
	case killStop:
		return &finished{run: e.run, token: e.token, outcome: storage.StateStopped, reason: e.stopReason}
	case killShutdown:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: InterruptedReason}
	case killLost:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: LostContactReason}
	case killTimeout:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: storage.TimedOutReason(e.timeout)}
	default:
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: "assignment lost", drop: true}
	}
}

// execution is one run being executed.
type execution struct {
	run, token string
	identity   string // the worker identity it was assigned to
	slot       int    // its task-0 slot there
	group      string
	stopReason string // set (under Worker.mu) before kill(killStop)
	timeout    time.Duration
	deadline   *time.Timer // kills it at its timeout (nil: none)
	ctx        context.Context
	cancel     context.CancelFunc
	once       sync.Once
	why        atomic.Int32 // the first kill reason (0: none)
}

func newExecution(run, token, group string, timeout time.Duration) *execution {
	e := &execution{run: run, token: token, group: group, timeout: timeout}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e
}

// kill asks the execution to end (its handler's context is cancelled);
// only the first reason counts.
func (e *execution) kill(why killReason) {
	e.once.Do(func() {
		e.why.Store(int32(why))
		e.cancel()
	})
}

// reason is the first kill reason (0: not killed).
func (e *execution) reason() killReason { return killReason(e.why.Load()) }
