package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// traceSink is --trace: an OpenTelemetry SDK provider (every span
// sampled) exporting over OTLP/HTTP to a sink in this process that reads
// and discards what it gets, so the bench pays what a traced deployment
// pays (spans, their batching, protobuf, HTTP) but no collector.
type traceSink struct {
	srv      *http.Server
	tp       *sdktrace.TracerProvider
	ended    atomic.Int64 // spans ended (counted by a span processor)
	requests atomic.Int64 // export requests the sink got
	bytes    atomic.Int64
}

// TraceResult is what --trace adds to a Result.
type TraceResult struct {
	// Spans ended in the process (submit, decide, execute, report), per
	// run and in all; ExportRequests and ExportBytes what the sink got.
	Spans          int64   `json:"spans"`
	SpansPerRun    float64 `json:"spans_per_run"`
	ExportRequests int64   `json:"export_requests"`
	ExportBytes    int64   `json:"export_bytes"`
}

// spanCounter counts ended spans (a span processor beside the batcher).
type spanCounter struct{ n *atomic.Int64 }

func (spanCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c spanCounter) OnEnd(sdktrace.ReadOnlySpan)                   { c.n.Add(1) }
func (spanCounter) Shutdown(context.Context) error                  { return nil }
func (spanCounter) ForceFlush(context.Context) error                { return nil }

func startTraceSink(ctx context.Context) (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: --trace: %w", err)
	}
	s := &traceSink{}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	})}
	go func() { _ = s.srv.Serve(ln) }()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+ln.Addr().String()+"/v1/traces"))
	if err != nil {
		_ = s.srv.Close()
		return nil, fmt.Errorf("bench: --trace: %w", err)
	}
	// a queue for a burst of 10,000 runs' spans (the default 2,048 drops
	// spans at this rate: OTEL_BSP_MAX_QUEUE_SIZE, docs/operations.md)
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(1<<17)),
		sdktrace.WithSpanProcessor(spanCounter{&s.ended}))
	return s, nil
}

// flush exports what is queued.
func (s *traceSink) flush(ctx context.Context) {
	if s == nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = s.tp.ForceFlush(fctx)
}

func (s *traceSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.tp.Shutdown(ctx)
	_ = s.srv.Close()
}

func (s *traceSink) result(runs int) *TraceResult {
	if s == nil {
		return nil
	}
	n := s.ended.Load()
	return &TraceResult{Spans: n, SpansPerRun: float64(n) / float64(max(runs, 1)), ExportRequests: s.requests.Load(), ExportBytes: s.bytes.Load()}
}

// cpuTime is this process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
