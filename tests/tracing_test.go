package tests

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// gotSpan is one span an OTLP receiver got.
type gotSpan struct {
	service, name       string
	trace, span, parent string // hex
	attrs               map[string]string
	events              []string // "name:wasmsched.report"
	start, end          time.Time
}

// otlpReceiver is an in-test OTLP/HTTP trace receiver (POST /v1/traces,
// protobuf, optionally gzipped), on 127.0.0.1.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []gotSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	o := &otlpReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.add(&req)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpReceiver) add(req *coltrace.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				o.spans = append(o.spans, spanOf(service, sp))
			}
		}
	}
}

func spanOf(service string, sp *tracepb.Span) gotSpan {
	g := gotSpan{service: service, name: sp.GetName(), trace: hex.EncodeToString(sp.GetTraceId()),
		span: hex.EncodeToString(sp.GetSpanId()), parent: hex.EncodeToString(sp.GetParentSpanId()),
		attrs: map[string]string{}, start: time.Unix(0, int64(sp.GetStartTimeUnixNano())),
		end: time.Unix(0, int64(sp.GetEndTimeUnixNano()))}
	for _, ev := range sp.GetEvents() {
		e := ev.GetName()
		for _, a := range ev.GetAttributes() {
			if a.GetKey() == "wasmsched.report" {
				e += ":" + a.GetValue().GetStringValue()
			}
		}
		g.events = append(g.events, e)
	}
	for _, a := range sp.GetAttributes() {
		v := a.GetValue()
		switch {
		case v.GetStringValue() != "":
			g.attrs[a.GetKey()] = v.GetStringValue()
		default:
			g.attrs[a.GetKey()] = fmt.Sprint(v.GetIntValue())
		}
	}
	return g
}

// byName returns the spans named name of trace id tr.
func (o *otlpReceiver) byName(tr, name string) []gotSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []gotSpan
	for _, s := range o.spans {
		if s.trace == tr && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// env is the OTEL environment that sends a process's spans here.
func (o *otlpReceiver) env(service string) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + o.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=" + service}
}

// TestTracing_endToEnd, on real processes (redis-server, serve, an exec
// worker, the CLI's submit), each exporting OTLP to an in-test receiver:
// every run is one trace, its submitter's (TRACEPARENT of the CLI; a
// run submitted without one gets its own); the CLI's submit span is a
// child of the submitter's span; the leader's decision span is a child of
// the submit span and carries the policy's name and version and the
// decision's reason as the run records them; the worker's execution span
// is a child of the submit span, with its report as an event; and the
// program sees TRACEPARENT naming the execution span, in the same trace.
func TestTracing_endToEnd(t *testing.T) {
	t.Parallel()
	const ns = "tracing"
	o := newOTLPReceiver(t)
	r := redistest.Start(t)
	startBinaryEnv(t, Binary(t), "host-0", o.env("host"), "--redis", r.URL(), "-n", ns, "serve",
		"--advertise", "127.0.0.1:7881", "--lease-ttl", rtLeaseTTL.String(), "--admin-addr", "")
	prog := filepath.Join(t.TempDir(), "prog.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"tp=$TRACEPARENT\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := startBinaryEnv(t, Binary(t), "worker", append(o.env("worker"), "TRACEPARENT=00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"),
		"--redis", r.URL(), "-n", ns, "worker", "--exec", prog, "--slots", "2", "--advertise", "127.0.0.1:7882",
		"--heartbeat-ttl", rtHeartbeatTTL.String())
	w.WaitLog(t, 10*time.Second, "worker registered")
	cli(t, r, ns, "group", "set", "g", "--max-active", "4")

	// three runs in the submitters' traces, one without a trace of its own
	submitters := map[string]string{}
	for i := 1; i <= 3; i++ {
		submitters[fmt.Sprintf("t%d", i)] = fmt.Sprintf("00-%032x-%016x-01", 0xa0+i, 0xb0+i)
	}
	for id, tp := range submitters {
		submitWithEnv(t, r, ns, append(o.env("submitter"), "TRACEPARENT="+tp), "g", "--id", id)
	}
	submitWithEnv(t, r, ns, o.env("submitter"), "g", "--id", "own")

	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	runs := waitFinal(t, c, 30*time.Second, "t1", "t2", "t3", "own")
	traces := map[string]string{} // run -> its trace id
	for id, run := range runs {
		if run.State != "SUCCEEDED" {
			t.Fatalf("%s: %s %q", id, run.State, run.Reason)
		}
		parts := strings.Split(run.TraceParent, "-")
		if len(parts) != 4 {
			t.Fatalf("%s: traceparent %q", id, run.TraceParent)
		}
		traces[id] = parts[1]
		if tp, ok := submitters[id]; ok && parts[1] != strings.Split(tp, "-")[1] {
			t.Errorf("%s: kept trace %s, want its submitter's %s", id, parts[1], tp)
		}
	}
	if out := cli(t, r, ns, "run", "show", "t1"); !strings.Contains(out, "TRACE") || !strings.Contains(out, traces["t1"]) {
		t.Errorf("run show t1 does not show its trace %s:\n%s", traces["t1"], out)
	}
	if traces["own"] == traces["t1"] || traces["own"] == "" {
		t.Errorf("the run without a submitter's trace is in trace %q", traces["own"])
	}

	for id, run := range runs {
		tr := traces[id]
		var sub, dec, ex gotSpan
		deadline := time.Now().Add(15 * time.Second)
		for {
			s, d, e := o.byName(tr, "wasmsched.submit"), o.byName(tr, "wasmsched.decide"), o.byName(tr, "wasmsched.execute")
			if len(s) > 0 && len(d) > 0 && len(e) > 0 {
				if len(s) != 1 || len(d) != 1 || len(e) != 1 {
					t.Fatalf("%s: spans submit %d, decide %d, execute %d; want one each", id, len(s), len(d), len(e))
				}
				sub, dec, ex = s[0], d[0], e[0]
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s (trace %s): spans submit %d, decide %d, execute %d; want one each", id, tr, len(s), len(d), len(e))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if tp, ok := submitters[id]; ok {
			if want := strings.Split(tp, "-")[2]; sub.parent != want {
				t.Errorf("%s: submit span's parent %s, want the submitter's span %s", id, sub.parent, want)
			}
		} else if sub.parent != "" {
			t.Errorf("%s: submit span has parent %s, want a root", id, sub.parent)
		}
		if sub.service != "submitter" || dec.service != "host" || ex.service != "worker" {
			t.Errorf("%s: services %s %s %s", id, sub.service, dec.service, ex.service)
		}
		if dec.parent != sub.span || ex.parent != sub.span {
			t.Errorf("%s: parents: decide %s, execute %s, want the submit span %s", id, dec.parent, ex.parent, sub.span)
		}
		if len(ex.events) != 2 || ex.events[0] != "wasmsched.returned" || ex.events[1] != "wasmsched.report:written" {
			t.Errorf("%s: execute span events %q, want the handler's return, then the report written", id, ex.events)
		}
		if run.Decision == nil {
			t.Fatalf("%s: no decision recorded", id)
		}
		for k, want := range map[string]string{"wasmsched.policy": "wait", "wasmsched.policy.version": run.PolicyVersion,
			"wasmsched.reason": run.Decision.Reason, "wasmsched.action": "launch", "wasmsched.run": id, "wasmsched.group": "g"} {
			if got := dec.attrs[k]; got != want || want == "" {
				t.Errorf("%s: decide span %s = %q, want %q", id, k, got, want)
			}
		}
		if ex.attrs["wasmsched.outcome"] != "SUCCEEDED" || ex.attrs["wasmsched.run"] != id || ex.attrs["wasmsched.attempt"] != "1" {
			t.Errorf("%s: execute span attributes %v", id, ex.attrs)
		}
		if want := "tp=00-" + tr + "-" + ex.span + "-01"; !strings.Contains(run.Output, want) {
			t.Errorf("%s: the program saw %q, want %q (the execution span)", id, run.Output, want)
		}
	}
}

// submitWithEnv runs `wasmsched submit` with env added (exit 0 wanted).
func submitWithEnv(t *testing.T, r *redistest.Server, ns string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(Binary(t), append([]string{"--redis", r.URL(), "-n", ns, "submit"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("submit %v: %v: %s", args, err, out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("submit %v did not end", args)
	}
}
