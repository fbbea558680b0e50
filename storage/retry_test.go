package storage_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// TestStore_retry: a FAILED or STOPPED run goes back to WAITING as its
// next attempt (its finished attempt in its attempt log, out of the
// finished zset, parked due now); any other state is ErrBadState with
// nothing written; RetryGroup retries exactly the runs its filter selects.
func TestStore_retry(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "w1", 8, time.Minute))
		ok(e.s.SetGroup(ctx, "g", "wait", 10))(t)
		finish := func(id string, state storage.State, labels ...abi.Label) {
			t.Helper()
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id, Labels: labels}))(t)
			launch(t, e, f, "g", id)
			r := ok(e.s.GetRun(ctx, id))(t)
			mustNil(t, e.s.Report(ctx, r.Assignments[0].Worker, id, r.Assignments[0].Token, state, "it broke"))
		}
		finish("f1", storage.StateFailed)
		finish("ok1", storage.StateSucceeded)
		r := ok(e.s.RetryRun(ctx, "f1", "alice"))(t)
		if r.State != storage.StateWaiting || r.Attempt != 2 || r.MaxAttempts != 2 || !strings.Contains(r.Reason, "retried by alice") {
			t.Fatalf("retried f1: %s attempt %d of %d %q", r.State, r.Attempt, r.MaxAttempts, r.Reason)
		}
		if len(r.Attempts) != 1 || r.Attempts[0].N != 1 || r.Attempts[0].Worker != "w1" || r.Attempts[0].Reason != "it broke" {
			t.Fatalf("f1's attempt log %+v, want its first attempt", r.Attempts)
		}
		k := keyspace.Of(e.s)
		if e.c.ZScore(ctx, k.Finished("g"), "f1").Err() == nil || e.c.ZScore(ctx, k.Delayed("g"), "f1").Err() != nil {
			t.Fatal("f1 should have left finished for delayed")
		}
		for _, id := range []string{"ok1", "f1"} { // SUCCEEDED; WAITING now
			e.unchanged(t, func() {
				if _, err := e.s.RetryRun(ctx, id, "alice"); !errors.Is(err, storage.ErrBadState) || !strings.Contains(err.Error(), "only a FAILED or STOPPED run") {
					t.Fatalf("retry %s: %v, want ErrBadState", id, err)
				}
			})
		}
		if _, err := e.s.RetryRun(ctx, "nope", "alice"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("retry of an unknown run: %v", err)
		}

		// the group: FAILED runs with tenant=a only
		a, b := abi.Label{Key: "tenant", Value: "a"}, abi.Label{Key: "tenant", Value: "b"}
		finish("a1", storage.StateFailed, a)
		finish("a2", storage.StateFailed, a)
		finish("b1", storage.StateFailed, b)
		finish("s1", storage.StateStopped, a)
		n := ok(e.s.RetryGroup(ctx, "g", storage.RetryFilter{State: storage.StateFailed, Labels: []abi.Label{a}}, "bob"))(t)
		if n != 2 {
			t.Fatalf("retried %d, want 2 (a1, a2)", n)
		}
		for id, want := range map[string]storage.State{"a1": storage.StateWaiting, "a2": storage.StateWaiting,
			"b1": storage.StateFailed, "s1": storage.StateStopped, "ok1": storage.StateSucceeded} {
			if st := ok(e.s.GetRun(ctx, id))(t).State; st != want {
				t.Errorf("%s: %s, want %s", id, st, want)
			}
		}
		if n := ok(e.s.RetryGroup(ctx, "g", storage.RetryFilter{State: storage.StateStopped, Limit: 5}, "bob"))(t); n != 1 {
			t.Fatalf("stopped retried %d, want 1 (s1)", n)
		}
		e.unchanged(t, func() {
			if _, err := e.s.RetryGroup(ctx, "g", storage.RetryFilter{State: storage.StateSucceeded}, "bob"); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("retry SUCCEEDED runs: %v, want ErrInvalid", err)
			}
			if _, err := e.s.RetryGroup(ctx, "nope", storage.RetryFilter{}, "bob"); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("retry an unknown group: %v, want ErrNotFound", err)
			}
		})
	})
}

// TestStore_progress: only the worker running a run under its token writes
// its progress; the run record reads it back; a bad fraction or message is
// refused; a finished run takes none.
func TestStore_progress(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "w1", 1, time.Minute))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1"}))(t)
		launch(t, e, f, "g", "r1")
		r := ok(e.s.GetRun(ctx, "r1"))(t)
		tok := r.Assignments[0].Token
		if wrote := ok(e.s.SetProgress(ctx, "w1", "r1", "other-token", 0.5, "x"))(t); wrote {
			t.Fatal("a progress under another token was written")
		}
		if wrote := ok(e.s.SetProgress(ctx, "w1", "r1", tok, 0.25, "a quarter"))(t); !wrote {
			t.Fatal("the runner's progress was not written")
		}
		p := ok(e.s.GetRun(ctx, "r1"))(t).Progress
		if p == nil || p.Fraction != 0.25 || p.Message != "a quarter" || p.At.IsZero() {
			t.Fatalf("progress %+v", p)
		}
		ok(e.s.SetProgress(ctx, "w1", "r1", tok, -1, "unknown"))(t)
		if p := ok(e.s.GetRun(ctx, "r1"))(t).Progress; p.Fraction != -1 || p.Message != "unknown" {
			t.Fatalf("progress without a fraction %+v", p)
		}
		for _, bad := range []float64{1.5, -0.5} {
			if _, err := e.s.SetProgress(ctx, "w1", "r1", tok, bad, ""); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("fraction %v: %v, want ErrInvalid", bad, err)
			}
		}
		if _, err := e.s.SetProgress(ctx, "w1", "r1", tok, 0, strings.Repeat("m", 300)); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("a long message: %v, want ErrInvalid", err)
		}
		mustNil(t, e.s.Report(ctx, "w1", "r1", tok, storage.StateSucceeded, ""))
		if wrote := ok(e.s.SetProgress(ctx, "w1", "r1", tok, 1, "late"))(t); wrote {
			t.Fatal("a finished run took a progress")
		}
	})
}

// TestStore_traceParent: a run keeps the traceparent it was submitted with
// (alone, and beside an idempotency key and requirements: every submit
// layout), TraceParents reads them in order ("" for none and for no run),
// and a malformed one is ErrInvalid with nothing written.
func TestStore_traceParent(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1", TraceParent: tp}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r2"}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r3", TraceParent: tp, IdempotencyKey: "k3",
			Require: []abi.Label{{Key: "zone", Value: "a"}}, Labels: []abi.Label{{Key: "tenant", Value: "a"}}}))(t)
		res := e.s.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "g", ID: "b1", TraceParent: tp, IdempotencyKey: "kb1"},
			{Group: "g", ID: "b2", TraceParent: tp, Require: []abi.Label{{Key: "zone", Value: "b"}}}, {Group: "g", ID: "b3"}})
		for _, r := range res {
			mustNil(t, r.Err)
		}
		for id, want := range map[string]string{"r1": tp, "r2": "", "r3": tp, "b1": tp, "b2": tp, "b3": ""} {
			r := ok(e.s.GetRun(ctx, id))(t)
			if r.TraceParent != want {
				t.Errorf("%s: traceparent %q, want %q", id, r.TraceParent, want)
			}
			if id == "r3" && (len(r.Require) != 1 || len(r.Labels) != 1) {
				t.Errorf("r3 lost its requirements or labels beside its trace: %+v %+v", r.Require, r.Labels)
			}
		}
		got := ok(e.s.TraceParents(ctx, []string{"r1", "r2", "nope", "b2"}))(t)
		if strings.Join(got, ",") != tp+",,,"+tp {
			t.Fatalf("TraceParents: %q", got)
		}
		for _, bad := range []string{"x", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"00-00000000000000000000000000000000-00f067aa0ba902b7-01", tp + "-extra"} {
			_, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "bad", TraceParent: bad})
			if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "traceparent") {
				t.Fatalf("traceparent %q: %v, want ErrInvalid naming it", bad, err)
			}
		}
		if _, err := e.s.GetRun(ctx, "bad"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a refused submit wrote its run: %v", err)
		}
	})
}
