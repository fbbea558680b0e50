package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of every wasmsched span.
const Name = "github.com/wasmsched/wasmsched"

// Span (and event) names: one trace per run, from its submit to its report.
const (
	SpanSubmit  = "wasmsched.submit"  // the client's submit (the run's parent)
	SpanDecide  = "wasmsched.decide"  // a leader's decision that acted on the run
	SpanExecute = "wasmsched.execute" // a worker's attempt (the handler's context)
	SpanReport  = "wasmsched.report"  // an event of the execution span: its outcome written to the store
)

// TraceParentLen is the length of a version 00 traceparent.
const TraceParentLen = 55

// Valid reports whether tp is a version 00 W3C traceparent with a valid
// trace and span id ("" is not).
func Valid(tp string) bool {
	_, ok := Parse(tp)
	return ok
}

// Parse reads a version 00 traceparent (lower-case hex, non-zero ids) as
// a remote span context: W3C Trace Context's rules, without the
// allocations of a propagator's carrier (it runs for every traced run on
// the leader and the worker).
func Parse(tp string) (trace.SpanContext, bool) {
	if len(tp) != TraceParentLen || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !unhex(tid[:], tp[3:35]) || !unhex(sid[:], tp[36:52]) || !unhex(flags[:], tp[53:55]) {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

// unhex decodes lower-case hex s into dst (len(s) = 2·len(dst)).
func unhex(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// ContextWith returns ctx with tp as its remote parent span context; a
// tp that is not a valid traceparent leaves ctx alone (W3C: start anew).
func ContextWith(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	sc, ok := Parse(tp)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// TraceParent is the traceparent of ctx's span ("" when it has none).
func TraceParent(ctx context.Context) string {
	return Format(trace.SpanContextFromContext(ctx))
}

// Format is sc as a version 00 traceparent ("" when sc is not valid).
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [TraceParentLen]byte
	copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// Tracer is the wasmsched tracer of tp (nil: the global provider).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Name)
}

// Enabled reports whether the environment turns tracing on (see the
// package doc).
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(os.Getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv starts the OpenTelemetry SDK when the environment turns tracing
// on: it becomes the global tracer provider (and W3C trace context the
// global propagator), and shutdown flushes what is buffered. With tracing
// off it returns a nil provider and a shutdown that does nothing. service
// names the process unless OTEL_SERVICE_NAME does.
func FromEnv(ctx context.Context, service string) (trace.TracerProvider, func(context.Context) error, error) {
	none := func(context.Context) error { return nil }
	if !Enabled() {
		return nil, none, nil
	}
	exp := os.Getenv("OTEL_TRACES_EXPORTER")
	if exp != "" && !strings.EqualFold(exp, "otlp") {
		return nil, none, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: want otlp or none", exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, none, fmt.Errorf("tracing: %s=%q: wasmsched exports OTLP over http/protobuf only", v, p)
			}
			break
		}
	}
	e, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// the environment's service name and attributes over the default
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, none, fmt.Errorf("tracing: resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(e), sdktrace.WithResource(res))
	otel.SetTracerProvider(p)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return p, p.Shutdown, nil
}
