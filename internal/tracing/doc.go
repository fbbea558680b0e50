// Package tracing carries a run's W3C trace context and sets up the
// OpenTelemetry SDK from the standard OTEL_* environment variables.
//
// A run keeps the traceparent of the span that submitted it (the Go
// client's "wasmsched.submit", a child of the caller's context, or the
// caller's own span when no SDK records). The leader's decision spans and
// the worker's execution span are children of it, so one trace follows a
// run from submit to report across processes. The helpers here only
// parse and format that context; spans go through the OpenTelemetry API
// (go.opentelemetry.io/otel/trace), whose no-op provider makes them free
// when tracing is off.
//
// FromEnv is the CLI's switch: tracing is off unless OTEL_TRACES_EXPORTER
// is "otlp" or an OTLP endpoint is set, and OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turns it off. Spans then go over OTLP/HTTP
// (protobuf) as the exporter's own variables say (endpoint, headers,
// timeout, compression), sampled by OTEL_TRACES_SAMPLER (default: parent
// based, always on), with OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// naming the process.
package tracing
