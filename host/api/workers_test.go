package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// sseEvent is one frame of an event stream.
type sseEvent struct {
	Event string
	Data  string
}

// openStream opens path's event stream with token and sends its frames on
// the returned channel until the stream ends (closed then).
func (e *env) openStream(path, token string) (<-chan sseEvent, context.CancelFunc) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.Event != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	e.t.Cleanup(cancel)
	return ch, cancel
}

type assignJSON struct {
	Run, Token, Group, Payload string
	Attempt                    int    `json:"attempt"`
	TraceParent                string `json:"traceparent"`
}

// next waits (10 s at most) for the next frame of kind event.
func next(t *testing.T, ch <-chan sseEvent, event string) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended waiting for %q", event)
			}
			if ev.Event == event {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %q event in 10 s", event)
		}
	}
}

func nextAssign(t *testing.T, ch <-chan sseEvent) assignJSON {
	t.Helper()
	var a assignJSON
	if err := json.Unmarshal([]byte(next(t, ch, "assign").Data), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// schemaProps are the properties of a schema of openapi.json.
func schemaProps(t *testing.T, name string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for k := range doc.Components.Schemas[name].Properties {
		out[k] = true
	}
	return out
}

// conforms checks that every field of the JSON object raw is a property of
// schema, and that it has them all.
func conforms(t *testing.T, schema, raw string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s: %v: %s", schema, err, raw)
	}
	props := schemaProps(t, schema)
	for k := range m {
		if !props[k] {
			t.Errorf("%s: field %q is not in openapi.json", schema, k)
		}
	}
	for k := range props {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: openapi.json's property %q is not sent", schema, k)
		}
	}
}

// asToken runs f with the env's token set to tok.
func (e *env) asToken(tok string, f func()) {
	old := e.tok
	e.tok = tok
	defer func() { e.tok = old }()
	f()
}

// waitRun polls run id until its state is want (10 s at most).
func (e *env) waitRun(id, want string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var r map[string]any
		e.asToken(adminTok, func() { e.do("GET", ns+"/runs/"+id, "", &r) })
		if r["state"] == want {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %v after 10 s, want %s", id, r["state"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAPI_workers: the worker protocol over HTTP, with a leader and no
// other worker: a worker token registers a worker and receives its runs on
// the assignment stream; a report under the token makes the run SUCCEED
// (with its result) or FAIL (retried with attempts left); a stop reaches
// the stream and the run is STOPPED; a report is taken once per token and
// only from the worker's own token; a worker that stops heartbeating is
// stopped and its run in flight is interrupted and retried; a drain lets
// the run in flight finish, then the worker deregisters. A read token
// cannot register a worker, and a worker token can do nothing else.
func TestAPI_workers(t *testing.T) {
	e := newEnv(t, opts{tokens: true, engine: true, noWorker: true})
	e.do("PUT", ns+"/groups/remote", `{"max_active": 4}`, nil)
	e.fails(403, "forbidden", "needs a worker or admin token", "POST", ns+"/workers", `{"slots": 2}`, "Authorization", "Bearer "+readTok)
	e.fails(403, "forbidden", "this token has scope worker", "GET", ns+"/groups", "", "Authorization", "Bearer "+workerTok)
	e.fails(403, "forbidden", "this token has scope worker", "POST", ns+"/groups/remote/runs", `{}`, "Authorization", "Bearer "+workerTok)
	e.fails(400, "invalid", "slots -1: want 1 to", "POST", ns+"/workers", `{"slots": -1}`, "Authorization", "Bearer "+workerTok)
	e.fails(400, "invalid", "heartbeat_ttl_ms 10", "POST", ns+"/workers", `{"heartbeat_ttl_ms": 10}`, "Authorization", "Bearer "+workerTok)

	var w1raw json.RawMessage
	e.asToken(workerTok, func() {
		e.do("POST", ns+"/workers", `{"name": "probe", "slots": 1, "labels": {"k": "v"}, "groups": ["none-*"]}`, &w1raw)
	})
	conforms(t, "Worker", string(w1raw))
	var w1 struct {
		ID             string `json:"id"`
		Identity       string `json:"identity"`
		Slots          int    `json:"slots"`
		HeartbeatTTLMS int64  `json:"heartbeat_ttl_ms"`
	}
	e.asToken(workerTok, func() {
		if got := e.do("POST", ns+"/workers", `{"name": "py", "slots": 2, "groups": ["remote"], "heartbeat_ttl_ms": 1500}`, &w1); got != 201 {
			t.Fatalf("register: %d %+v", got, w1)
		}
	})
	if !strings.HasPrefix(w1.ID, "w-") || !strings.HasPrefix(w1.Identity, "py#") || w1.Slots != 2 || w1.HeartbeatTTLMS != 1500 {
		t.Fatalf("registered %+v", w1)
	}
	wp := ns + "/workers/" + w1.ID
	beat := func() {
		e.asToken(workerTok, func() {
			if got := e.do("POST", wp+"/heartbeat", "", nil); got != 200 {
				t.Fatalf("heartbeat: %d", got)
			}
		})
	}
	stopBeat := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopBeat:
				return
			case <-time.After(300 * time.Millisecond):
			}
			req, _ := http.NewRequest("POST", e.srv.URL+wp+"/heartbeat", nil)
			req.Header.Set("Authorization", "Bearer "+workerTok)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
	beat()
	stream, _ := e.openStream(wp+"/assignments", workerTok)

	// 1: a result
	// (in a submitter's trace: the run keeps it, and the assignment hands
	// the worker its execution span's context, in the same trace)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var sub map[string]any
	e.do("POST", ns+"/groups/remote/runs", `{"id": "ok-1", "payload": "hello"}`, &sub, "traceparent", tp)
	if sub["traceparent"] != tp {
		t.Fatalf("the run kept traceparent %v, want the request's %s", sub["traceparent"], tp)
	}
	first := next(t, stream, "assign")
	conforms(t, "Assignment", first.Data)
	var a assignJSON
	_ = json.Unmarshal([]byte(first.Data), &a)
	if a.Run != "ok-1" || a.Payload != "hello" || a.Group != "remote" || a.Token == "" || a.Attempt != 1 {
		t.Fatalf("assignment %+v", a)
	}
	if !strings.HasPrefix(a.TraceParent, "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Fatalf("assignment traceparent %q, want the run's trace", a.TraceParent)
	}
	report := func(tok, worker, run, body string) int {
		var got int
		e.asToken(tok, func() { got = e.do("POST", ns+"/workers/"+worker+"/runs/"+run+"/report", body, nil) })
		return got
	}
	// progress of the assignment: written (the library's rate limit), refused for a bad fraction or token
	e.asToken(workerTok, func() {
		if got := e.do("POST", wp+"/runs/ok-1/progress", fmt.Sprintf(`{"token": %q, "fraction": 0.5, "message": "half"}`, a.Token), nil); got != 200 {
			t.Fatalf("progress: %d", got)
		}
	})
	e.fails(400, "invalid", "fraction 2: want 0 to 1", "POST", wp+"/runs/ok-1/progress", fmt.Sprintf(`{"token": %q, "fraction": 2}`, a.Token), "Authorization", "Bearer "+workerTok)
	e.fails(409, "conflict", "has no assignment", "POST", wp+"/runs/ok-1/progress", `{"token": "nope"}`, "Authorization", "Bearer "+workerTok)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var pr struct {
			Progress *struct {
				Fraction *float64 `json:"fraction"`
				Message  string   `json:"message"`
			} `json:"progress"`
		}
		e.asToken(adminTok, func() { e.do("GET", ns+"/runs/ok-1", "", &pr) })
		if pr.Progress != nil && pr.Progress.Message == "half" && pr.Progress.Fraction != nil && *pr.Progress.Fraction == 0.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ok-1's progress: %+v", pr.Progress)
		}
	}
	if got := report(workerTok, w1.ID, "ok-1", fmt.Sprintf(`{"token": %q, "result": "HELLO", "output": "said hello\n", "exit_code": 0}`, a.Token)); got != 200 {
		t.Fatalf("report: %d", got)
	}
	r := e.waitRun("ok-1", "SUCCEEDED")
	if r["result"] != "HELLO" || r["output"] != "said hello\n" {
		t.Fatalf("run ok-1: %v", r)
	}
	// once per token
	if got := report(workerTok, w1.ID, "ok-1", fmt.Sprintf(`{"token": %q, "result": "again"}`, a.Token)); got != 409 {
		t.Fatalf("a second report of one token: %d, want 409", got)
	}

	// 1b: several reports in one request; a refused one is listed
	e.do("POST", ns+"/groups/remote/runs", `{"id": "batch-1"}`, nil)
	e.do("POST", ns+"/groups/remote/runs", `{"id": "batch-2"}`, nil)
	b1, b2 := nextAssign(t, stream), nextAssign(t, stream)
	var res struct {
		Accepted int `json:"accepted"`
		Refused  []struct{ Run, Token, Error string }
	}
	e.asToken(workerTok, func() {
		body := fmt.Sprintf(`{"reports": [{"run": %q, "token": %q, "result": "one"}, {"run": %q, "token": %q, "error": "two"}, {"run": "ok-1", "token": %q}]}`,
			b1.Run, b1.Token, b2.Run, b2.Token, a.Token)
		if got := e.do("POST", wp+"/reports", body, &res); got != 200 {
			t.Fatalf("reports: %d", got)
		}
	})
	if res.Accepted != 2 || len(res.Refused) != 1 || res.Refused[0].Run != "ok-1" || !strings.Contains(res.Refused[0].Error, "has no assignment") {
		t.Fatalf("reports: %+v, want 2 accepted and ok-1's (reported already) refused", res)
	}
	e.waitRun(b1.Run, "SUCCEEDED")
	if r := e.waitRun(b2.Run, "FAILED"); r["reason"] != "two" {
		t.Fatalf("%s: %v", b2.Run, r["reason"])
	}

	// 2: an error, retried, then FAILED
	e.do("POST", ns+"/groups/remote/runs", `{"id": "err-1", "max_attempts": 2, "retry_backoff_ms": 10}`, nil)
	for attempt := 1; attempt <= 2; attempt++ {
		a := nextAssign(t, stream)
		if a.Run != "err-1" || a.Attempt != attempt {
			t.Fatalf("attempt %d: %+v", attempt, a)
		}
		report(workerTok, w1.ID, "err-1", fmt.Sprintf(`{"token": %q, "error": "boom %d"}`, a.Token, attempt))
	}
	if r := e.waitRun("err-1", "FAILED"); r["reason"] != "boom 2" {
		t.Fatalf("run err-1: %v", r["reason"])
	}

	// 3: a stop reaches the stream; the run is STOPPED
	e.do("POST", ns+"/groups/remote/runs", `{"id": "stop-1"}`, nil)
	a = nextAssign(t, stream)
	e.do("POST", ns+"/runs/stop-1/stop", `{"reason": "enough"}`, nil)
	var stop struct{ Run, Token string }
	if err := json.Unmarshal([]byte(next(t, stream, "stop").Data), &stop); err != nil || stop.Run != "stop-1" || stop.Token != a.Token {
		t.Fatalf("stop event %+v %v", stop, err)
	}
	report(workerTok, w1.ID, "stop-1", fmt.Sprintf(`{"token": %q, "error": "aborted"}`, a.Token))
	e.waitRun("stop-1", "STOPPED")

	// 4: another worker token may not act for w1, nor report w1's run on its own worker
	var w2 struct{ ID string }
	e.asToken(worker2Tok, func() { e.do("POST", ns+"/workers", `{"name": "other", "groups": ["nothing-*"]}`, &w2) })
	e.do("POST", ns+"/groups/remote/runs", `{"id": "own-1"}`, nil)
	a = nextAssign(t, stream)
	body := fmt.Sprintf(`{"token": %q, "result": "stolen"}`, a.Token)
	e.fails(403, "forbidden", "registered with another token", "POST", wp+"/runs/own-1/report", body, "Authorization", "Bearer "+worker2Tok)
	e.fails(409, "conflict", "has no assignment", "POST", ns+"/workers/"+w2.ID+"/runs/own-1/report", body, "Authorization", "Bearer "+worker2Tok)
	e.fails(403, "forbidden", "registered with another token", "GET", wp+"/assignments", "", "Authorization", "Bearer "+worker2Tok)

	// 5: a reconnect gets the assignment not yet reported again; the old stream ends
	stream2, _ := e.openStream(wp+"/assignments", workerTok)
	if again := nextAssign(t, stream2); again.Token != a.Token {
		t.Fatalf("after a reconnect: %+v, want token %s again", again, a.Token)
	}
	for range stream { // (drained: the first stream ended)
	}
	report(workerTok, w1.ID, "own-1", fmt.Sprintf(`{"token": %q, "result": "mine"}`, a.Token))
	e.waitRun("own-1", "SUCCEEDED")

	// 6: a drain: the run in flight finishes, then the worker deregisters
	e.do("POST", ns+"/groups/remote/runs", `{"id": "drain-1"}`, nil)
	a = nextAssign(t, stream2)
	e.asToken(workerTok, func() {
		if got := e.do("DELETE", wp, "", nil); got != 202 {
			t.Fatalf("drain: %d", got)
		}
	})
	next(t, stream2, "drain")
	report(workerTok, w1.ID, "drain-1", fmt.Sprintf(`{"token": %q, "result": "done in the drain"}`, a.Token))
	e.waitRun("drain-1", "SUCCEEDED")
	next(t, stream2, "deregistered")
	close(stopBeat)
	e.fails(404, "not_found", "is not registered here", "POST", wp+"/heartbeat", "", "Authorization", "Bearer "+workerTok)

	// 7: a worker that stops heartbeating is stopped: its run in flight is
	// FAILED ("worker lost: ... missed its heartbeat TTL") and retried
	var w3 struct{ ID string }
	e.asToken(workerTok, func() { e.do("POST", ns+"/workers", `{"name": "silent", "heartbeat_ttl_ms": 1000}`, &w3) })
	s3, _ := e.openStream(ns+"/workers/"+w3.ID+"/assignments", workerTok)
	e.do("POST", ns+"/groups/remote/runs", `{"id": "lost-1", "max_attempts": 2, "retry_backoff_ms": 10}`, nil)
	if a := nextAssign(t, s3); a.Run != "lost-1" {
		t.Fatalf("silent worker got %+v", a)
	}
	next(t, s3, "deregistered")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var r struct {
			Attempt  int `json:"attempt"`
			Attempts []struct {
				Reason string `json:"reason"`
			} `json:"attempts"`
		}
		e.do("GET", ns+"/runs/lost-1", "", &r)
		if r.Attempt == 2 && len(r.Attempts) > 0 && strings.Contains(r.Attempts[0].Reason, "missed its heartbeat TTL") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lost-1 after the worker went silent: %+v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAPI_retry: a run that is not FAILED or STOPPED cannot be retried
// (409 bad_state, nothing changed); a group retry answers how many it put
// back, refuses a bad state or since (400) and an unknown group (404).
// The end-to-end retries are tests/retry_test.go's.
func TestAPI_retry(t *testing.T) {
	e := newEnv(t, opts{})
	e.do("POST", ns+"/groups/g/runs", `{"id": "w1"}`, nil)
	e.fails(409, "bad_state", "run w1 is WAITING: only a FAILED or STOPPED run can be retried", "POST", ns+"/runs/w1/retry", "")
	e.fails(404, "not_found", "nope", "POST", ns+"/runs/nope/retry", "")
	var res struct {
		Group string `json:"group"`
		Runs  int    `json:"runs"`
	}
	if got := e.do("POST", ns+"/groups/g/retry", `{"state": "FAILED", "labels": {"tenant": "a"}}`, &res); got != 200 || res.Group != "g" || res.Runs != 0 {
		t.Fatalf("group retry: %d %+v", got, res)
	}
	e.fails(400, "invalid", "only FAILED or STOPPED", "POST", ns+"/groups/g/retry", `{"state": "SUCCEEDED"}`)
	e.fails(400, "invalid", "want an RFC 3339 time", "POST", ns+"/groups/g/retry", `{"since": "yesterday"}`)
	e.fails(404, "not_found", "nope", "POST", ns+"/groups/nope/retry", `{}`)
}
