package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// traceStore is a store with runs r1 (traced), r2 (not traced).
func traceStore(t testing.TB) *storage.Store {
	t.Helper()
	srv := redistest.Start(t)
	st, err := storage.New(srv.Client(t), "trace")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []storage.SubmitRequest{{Group: "g", ID: "r1", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Group: "g", ID: "r2"}} {
		if _, err := st.Submit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestDecisionSpans: an applied decision's actions become one decide
// span per traced run, a child of the run's submit span with the
// decision's policy, version, reason and wake; an untraced run gets none;
// past the buffer, spans are dropped and counted, never the caller held;
// a nil writer (tracing off) takes decisions and does nothing.
func TestDecisionSpans(t *testing.T) {
	st := traceStore(t)
	exp := tracetest.NewInMemoryExporter()
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(k string, n int) { mu.Lock(); counts[k] += n; mu.Unlock() }
	s := newDecisionSpans(st, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), slog.New(slog.NewTextHandler(io.Discard, nil)), count)
	t0 := time.Now()
	d := storage.Decision{Policy: "wait", PolicyVersion: "abc123", ClaimID: "7:g:3", WakeAt: t0.Add(time.Minute).UnixMilli(),
		Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r1", Reason: "oldest"}, {Kind: storage.ActionDiscard, Run: "r2", Reason: "newer"}}}
	s.add("g", d, 7, t0, t0.Add(time.Millisecond))
	s.close()
	got := exp.GetSpans()
	if len(got) != 1 {
		t.Fatalf("%d spans, want 1 (r1's; r2 is not traced)", len(got))
	}
	sp := got[0]
	if sp.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sp.Parent.SpanID().String() != "00f067aa0ba902b7" || !sp.Parent.IsRemote() {
		t.Errorf("parent %v, want the run's submit span", sp.Parent)
	}
	attrs := map[string]string{}
	for _, a := range sp.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, want := range map[string]string{"wasmsched.run": "r1", "wasmsched.action": "launch", "wasmsched.reason": "oldest",
		"wasmsched.policy": "wait", "wasmsched.policy.version": "abc123", "wasmsched.decision": "7:g:3", "wasmsched.namespace": "trace"} {
		if attrs[k] != want {
			t.Errorf("%s = %q, want %q", k, attrs[k], want)
		}
	}
	if attrs["wasmsched.wake_at"] == "" || !sp.StartTime.Equal(t0) {
		t.Errorf("wake %q, start %v (want %v)", attrs["wasmsched.wake_at"], sp.StartTime, t0)
	}
	if counts["trace.spans"] != 1 || counts["trace.dropped"] != 0 {
		t.Errorf("counters %v", counts)
	}

	// a full buffer: dropped and counted (a writer that is not reading)
	full := &decisionSpans{ch: make(chan decidedSpan, 1), count: count}
	full.add("g", d, 7, t0, t0)
	full.add("g", d, 7, t0, t0)
	if counts["trace.dropped"] != 2 {
		t.Errorf("dropped %d, want 2 (the second decision's two actions)", counts["trace.dropped"])
	}
	// tracing off
	var off *decisionSpans
	off.add("g", d, 7, t0, t0)
	off.close()
}

// BenchmarkDecisionSpans_cpu is what one decision span costs the leader:
// the SDK span, its batching and its OTLP/HTTP export to a local sink
// that discards it (the pipelined read of the trace contexts not
// included: it is Redis's, one HGET a run).
func BenchmarkDecisionSpans_cpu(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(1<<16)))
	s := &decisionSpans{tr: tp.Tracer("bench"), count: func(string, int) {}, ns: attribute.String("wasmsched.namespace", "bench")}
	d := decidedSpan{group: "g00001", d: storage.Decision{Policy: "wait", PolicyVersion: "3f2a9c1e", ClaimID: "1796561276133:g00001:42"},
		epoch: 1, start: time.Now(), end: time.Now()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tp1 := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		s.span(d, storage.Action{Kind: storage.ActionLaunch, Run: "r0000001", Reason: "oldest waiting run"}, tp1)
	}
	_ = tp.ForceFlush(context.Background())
	b.StopTimer()
	_ = tp.Shutdown(context.Background())
}
