package tracing_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/internal/tracing"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestValid(t *testing.T) {
	for _, c := range []struct {
		tp   string
		want bool
	}{
		{tp, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true}, // not sampled: still a context
		{"", false},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false}, // only version 00 is kept
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // zero span id
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{tp + "-x", false},
	} {
		if got := tracing.Valid(c.tp); got != c.want {
			t.Errorf("Valid(%q) = %v, want %v", c.tp, got, c.want)
		}
	}
}

func TestContextWith(t *testing.T) {
	if got := tracing.TraceParent(tracing.ContextWith(context.Background(), tp)); got != tp {
		t.Fatalf("round trip: %q", got)
	}
	if got := tracing.TraceParent(tracing.ContextWith(context.Background(), "junk")); got != "" {
		t.Fatalf("an invalid traceparent gave a context: %q", got)
	}
}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"unset", nil, false, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, ""},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}, false, ""},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, false, ""},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, "http/protobuf only"},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true, "want otlp or none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
				"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, c.env[k])
			}
			if got := tracing.Enabled(); got != c.on {
				t.Fatalf("Enabled = %v, want %v", got, c.on)
			}
			p, shutdown, err := tracing.FromEnv(context.Background(), "test")
			defer func() { _ = shutdown(context.Background()) }()
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case (p != nil) != c.on:
				t.Fatalf("provider %v with tracing on = %v", p, c.on)
			}
		})
	}
}

// A run's trace context travels as a traceparent: ContextWith makes it
// the parent of the spans started from the context, TraceParent reads it
// back.
func ExampleContextWith() {
	ctx := tracing.ContextWith(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	fmt.Println(tracing.TraceParent(ctx))
	fmt.Println(tracing.Valid("00-not-a-trace"))
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// false
}

// TestParse_matchesPropagator: Parse and Format agree with the
// OpenTelemetry W3C propagator on valid and invalid traceparents.
func TestParse_matchesPropagator(t *testing.T) {
	var tc propagation.TraceContext
	for _, s := range []string{tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01", "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01",
		"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01"} {
		want := trace.SpanContextFromContext(tc.Extract(context.Background(), propagation.MapCarrier{"traceparent": s}))
		got, ok := tracing.Parse(s)
		if ok != want.IsValid() || (ok && !got.Equal(want)) {
			t.Errorf("Parse(%q) = %v %v, want %v %v", s, got, ok, want, want.IsValid())
		}
		if !ok {
			continue
		}
		m := propagation.MapCarrier{}
		tc.Inject(trace.ContextWithSpanContext(context.Background(), got), m)
		if f := tracing.Format(got); f != m["traceparent"] {
			t.Errorf("Format(%q) = %q, the propagator's %q", s, f, m["traceparent"])
		}
	}
}
