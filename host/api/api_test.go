package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/api"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/recordtest"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

const (
	adminTok = "admin-token-0123456789"
	readTok  = "read-token-0123456789ab"
	// worker tokens (scope worker)
	workerTok  = "worker-token-0123456789"
	worker2Tok = "worker-token-2-0123456789"
)

// env is a redis-server, a namespace "ns" and the API over it (optionally
// with tokens and an engine: a leader and a simulated worker).
type env struct {
	t   *testing.T
	st  *storage.Store
	srv *httptest.Server
	tok string // the token requests send ("" = none)
}

type opts struct {
	durableOn bool // durable=on without a replica: every write is ErrNotReplicated
	tokens    bool
	engine    bool
	noWorker  bool // the engine without its simulated worker
}

func newEnv(t *testing.T, o opts) *env {
	t.Helper()
	r := redistest.Start(t)
	st, err := storage.New(r.Client(t), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if o.durableOn {
		if err := storagetest.SetDurability(st, storage.Durability{Mode: storage.DurableOn, Timeout: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := api.Config{Store: st}
	if o.tokens {
		p := filepath.Join(t.TempDir(), "tokens")
		writeFile(t, p, "# operators\n"+adminTok+" admin\n"+readTok+" read\n"+workerTok+" worker\n"+worker2Tok+" worker\n")
		toks, err := api.LoadTokens(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tokens = toks
	}
	s, err := api.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); _ = s.Close(context.Background()) })
	if o.engine {
		startEngine(t, ctx, st, !o.noWorker)
	}
	e := &env{t: t, st: st, srv: srv}
	if o.tokens {
		e.tok = adminTok
	}
	return e
}

// startEngine runs a leader (host + engine) and a simulated worker on st.
func startEngine(t *testing.T, ctx context.Context, st *storage.Store, withWorker bool) {
	t.Helper()
	h, err := host.New(ctx, host.Config{Store: st, Advertise: "api-test", LeaseTTL: time.Second, Engine: host.EngineConfig{SeriesInterval: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(ctx, worker.Config{Client: st.Redis(), Namespace: st.Namespace(), Advertise: "api-worker", Slots: 4,
		HeartbeatTTL: 600 * time.Millisecond, DrainTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	w.HandleDefault(worker.Simulate())
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = h.Run(ctx) }()
	if withWorker {
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = h.Close(context.Background())
	})
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// do sends a request and decodes a JSON reply into out (if not nil).
func (e *env) do(method, path, body string, out any, hdr ...string) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.tok != "" {
		req.Header.Set("Authorization", "Bearer "+e.tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type apiErr struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// fails asserts a request fails with status and code, with a message
// containing want.
func (e *env) fails(status int, code, want, method, path, body string, hdr ...string) {
	e.t.Helper()
	var ae apiErr
	got := e.do(method, path, body, &ae, hdr...)
	if got != status || ae.Code != code || !strings.Contains(ae.Error, want) {
		e.t.Errorf("%s %s: %d %+v, want %d %s containing %q", method, path, got, ae, status, code, want)
	}
}

type runJSON struct {
	ID       string `json:"id"`
	Group    string `json:"group"`
	Seq      int64  `json:"seq"`
	State    string `json:"state"`
	Priority int    `json:"priority"`
	Decision *struct {
		Action string `json:"action"`
		Policy string `json:"policy"`
	} `json:"decision"`
}

const ns = "/api/v1/namespaces/ns"

func TestAPI_runs(t *testing.T) {
	e := newEnv(t, opts{})
	var r runJSON
	if got := e.do("POST", ns+"/groups/g/runs", `{"id": "a", "priority": 3, "slots": 1, "payload": "x", "duration_ms": 10}`, &r); got != 201 || r.ID != "a" || r.Seq != 1 || r.State != "WAITING" {
		t.Fatalf("submit: %d %+v", got, r)
	}
	// idempotent submit: the same key returns the same run with 200
	var r1, r2 runJSON
	if got := e.do("POST", ns+"/groups/g/runs", `{}`, &r1, "Idempotency-Key", "k-1"); got != 201 {
		t.Fatalf("keyed submit: %d", got)
	}
	if got := e.do("POST", ns+"/groups/g/runs", `{}`, &r2, "Idempotency-Key", "k-1"); got != 200 || r2.ID != r1.ID || r2.Seq != r1.Seq {
		t.Fatalf("replayed submit: %d %+v, want 200 and run %s", got, r2, r1.ID)
	}
	// the key reused for another request: 409 naming the run, nothing written
	e.fails(409, "conflict", "the idempotency key was used for run "+r1.ID+" (group g) with another request", "POST", ns+"/groups/g/runs", `{"id": "other"}`, "Idempotency-Key", "k-1")
	e.fails(409, "conflict", "the idempotency key was used for run "+r1.ID, "POST", ns+"/groups/h/runs", `{}`, "Idempotency-Key", "k-1")
	if got := e.do("GET", ns+"/runs/a", "", &r); got != 200 || r.Priority != 3 {
		t.Fatalf("get: %d %+v", got, r)
	}
	var page struct {
		Runs []runJSON `json:"runs"`
		Next string    `json:"next_cursor"`
		More bool      `json:"more"`
	}
	if got := e.do("GET", ns+"/runs?group=g&limit=1", "", &page); got != 200 || len(page.Runs) != 1 || page.Runs[0].ID != r1.ID || page.Next == "" || !page.More {
		t.Fatalf("list: %d %+v", got, page)
	}
	if got := e.do("GET", ns+"/runs?cursor="+page.Next, "", &page); got != 200 || len(page.Runs) != 1 || page.Runs[0].ID != "a" || page.More {
		t.Fatalf("next page: %d %+v", got, page)
	}
	var ex struct {
		Why   string `json:"why"`
		Place int    `json:"place"`
	}
	if got := e.do("GET", ns+"/runs/"+r1.ID+"/explain", "", &ex); got != 200 || ex.Place != 2 || !strings.Contains(ex.Why, "launches it now") && !strings.Contains(ex.Why, "waits") {
		t.Fatalf("explain: %d %+v", got, ex)
	}
	if got := e.do("POST", ns+"/runs/a/stop", `{"reason": "no longer needed"}`, &r); got != 200 || r.State != "DISCARDED" {
		t.Fatalf("stop: %d %+v", got, r)
	}
	var ex2 struct {
		Why string `json:"why"`
	}
	if got := e.do("GET", ns+"/runs/a/explain", "", &ex2); got != 200 || !strings.Contains(ex2.Why, "no longer needed") {
		t.Fatalf("explain a stopped run: %d %+v", got, ex2)
	}

	// errors
	e.fails(409, "bad_state", "DISCARDED", "POST", ns+"/runs/a/stop", `{}`)
	e.fails(409, "conflict", "already exists", "POST", ns+"/groups/g/runs", `{"id": "a"}`)
	e.fails(404, "not_found", "expired or never existed", "GET", ns+"/runs/nosuch", "")
	e.fails(404, "not_found", "not found", "GET", ns+"/runs/nosuch/explain", "")
	e.fails(404, "not_found", "not found", "POST", ns+"/runs/nosuch/stop", `{}`)
	e.fails(404, "not_found", "not served here", "GET", "/api/v1/namespaces/other/runs", "")
	var none client.Page
	if got := e.do("GET", ns+"/runs?group=nosuch", "", &none); got != 200 || len(none.Runs) != 0 || none.More || none.Next != "" {
		t.Fatalf("runs of a group not made yet: %d %+v, want an empty page", got, none)
	}
	e.fails(404, "not_found", "no route", "GET", ns+"/nope", "")
	e.fails(400, "invalid", "slots", "POST", ns+"/groups/g/runs", `{"slots": -1}`)
	e.fails(400, "invalid", "slots 100000: at most 1024", "POST", ns+"/groups/g/runs", `{"slots": 100000}`)
	e.fails(400, "invalid", "unknown field", "POST", ns+"/groups/g/runs", `{"slot": 2}`)
	e.fails(400, "invalid", "request body", "POST", ns+"/groups/g/runs", `{"id": `)
	e.fails(400, "invalid", "negative", "POST", ns+"/groups/g/runs", `{"duration_ms": -5}`)
	e.fails(400, "invalid", "whitespace", "POST", ns+"/groups/a%20b/runs", `{}`)
	e.fails(400, "invalid", "cursor", "GET", ns+"/runs?cursor=bogus", "")
	e.fails(400, "invalid", "limit", "GET", ns+"/runs?limit=x", "")
	e.fails(400, "invalid", "limit", "GET", ns+"/runs?limit=5000", "")
	e.fails(400, "invalid", "state", "GET", ns+"/runs?state=NOPE", "")
	e.fails(413, "too_large", "", "POST", ns+"/groups/g/runs", `{"payload": "`+strings.Repeat("x", api.MaxBodyBytes)+`"}`)
	e.fails(400, "invalid", "payload is 100000 bytes, at most 65536", "POST", ns+"/groups/g/runs", `{"payload": "`+strings.Repeat("x", 100000)+`"}`)
	// runs in time: each bad field named
	e.fails(400, "invalid", "timeout_ms -1 is negative", "POST", ns+"/groups/g/runs", `{"timeout_ms": -1}`)
	e.fails(400, "invalid", "timeout_ms 0", "POST", ns+"/groups/g/runs", `{"timeout_ms": 0}`)
	e.fails(400, "invalid", "max_attempts 0", "POST", ns+"/groups/g/runs", `{"max_attempts": 0}`)
	e.fails(400, "invalid", "max_attempts 101", "POST", ns+"/groups/g/runs", `{"max_attempts": 101}`)
	e.fails(400, "invalid", "retry_backoff_ms -5 is negative", "POST", ns+"/groups/g/runs", `{"max_attempts": 3, "retry_backoff_ms": -5}`)
	e.fails(400, "invalid", "not_before", "POST", ns+"/groups/g/runs", `{"not_before": "2099-01-01T00:00:00Z"}`)
	e.fails(400, "invalid", "not_before", "POST", ns+"/groups/g/runs", `{"not_before": "tomorrow"}`)
	e.fails(400, "invalid", "run_timeout_ms -1 is negative", "PUT", ns+"/groups/g", `{"run_timeout_ms": -1}`)
	// labels and parameters (ABI v4): the bad one named
	e.fails(400, "invalid", `label "Ref": the key may hold only`, "POST", ns+"/groups/g/runs", `{"labels": {"Ref": "main"}}`)
	e.fails(400, "invalid", "the value is 300 bytes, at most 256", "POST", ns+"/groups/g/runs", `{"labels": {"ref": "`+strings.Repeat("v", 300)+`"}}`)
	e.fails(400, "invalid", "17 labels, at most 16", "POST", ns+"/groups/g/runs", `{"labels": {`+func() string {
		var kv []string
		for i := range 17 {
			kv = append(kv, fmt.Sprintf(`"k%d": "v"`, i))
		}
		return strings.Join(kv, ",")
	}()+`}}`)
	e.fails(400, "invalid", "parameter", "PUT", ns+"/groups/g", `{"params": {"Bad Name": "1"}}`)
	e.fails(400, "invalid", "label", "GET", ns+"/runs?label=nokey", "")
	e.fails(400, "invalid", "cron", "PUT", ns+"/schedules/s", `{"group": "g", "cron": "61 * * * *"}`)
	e.fails(400, "invalid", "tz", "PUT", ns+"/schedules/s", `{"group": "g", "cron": "@hourly", "tz": "Mars/Base"}`)
	e.fails(404, "not_found", "schedule", "GET", ns+"/schedules/nosuch", "")
	e.fails(404, "not_found", "schedule", "POST", ns+"/schedules/nosuch/pause", "")
	// a write a browser sends from another site is refused, also on an open API
	e.fails(403, "forbidden", "cross-origin POST from http://evil.example refused", "POST", ns+"/groups/g/runs", `{}`, "Origin", "http://evil.example")
	if got := e.do("POST", ns+"/groups/g/runs", `{"id": "same-origin"}`, nil, "Origin", e.srv.URL); got != 201 {
		t.Fatalf("a same-origin write: %d", got)
	}
	// nothing of the failed requests was written
	var all struct {
		Runs []runJSON `json:"runs"`
	}
	if e.do("GET", ns+"/runs?limit=1000", "", &all); len(all.Runs) != 3 {
		t.Fatalf("runs after the bad requests: %+v, want the 3 accepted", all.Runs)
	}
}

// TestAPI_groupControl: pause, resume, discard and stop answer with the
// group (and how many runs moved); an unknown group is 404.
func TestAPI_groupControl(t *testing.T) {
	e := newEnv(t, opts{})
	e.do("POST", ns+"/groups/gc/runs", `{"id": "gc1"}`, nil)
	var out struct {
		Group struct {
			Paused   bool   `json:"paused"`
			PausedBy string `json:"paused_by"`
			Waiting  int    `json:"waiting"`
		} `json:"group"`
		Runs int `json:"runs"`
	}
	if got := e.do("POST", ns+"/groups/gc/pause", `{"reason": "from the web UI"}`, &out); got != 200 || !out.Group.Paused || out.Group.PausedBy == "" {
		t.Fatalf("pause: %d %+v", got, out)
	}
	if got := e.do("POST", ns+"/groups/gc/resume", `{}`, &out); got != 200 || out.Group.Paused {
		t.Fatalf("resume: %d %+v", got, out)
	}
	e.do("POST", ns+"/groups/gc/pause", ``, nil)
	if got := e.do("POST", ns+"/groups/gc/discard", `{"reason": "clean"}`, &out); got != 200 || out.Runs != 1 || out.Group.Waiting != 0 {
		t.Fatalf("discard: %d %+v", got, out)
	}
	if got := e.do("POST", ns+"/groups/gc/stop", `{}`, &out); got != 200 || out.Runs != 0 {
		t.Fatalf("stop: %d %+v", got, out)
	}
	e.fails(404, "not_found", "nosuch", "POST", ns+"/groups/nosuch/pause", `{}`)
	e.fails(404, "not_found", "nosuch", "POST", ns+"/groups/nosuch/stop", `{}`)
	e.fails(404, "not_found", "nosuch", "POST", ns+"/groups/nosuch/discard", `{}`)
	e.fails(400, "invalid", "unknown field", "POST", ns+"/groups/gc/pause", `{"by": "x"}`)
}

func TestAPI_groups(t *testing.T) {
	e := newEnv(t, opts{})
	var g struct {
		Name      string `json:"name"`
		Policy    string `json:"policy"`
		MaxActive int    `json:"max_active"`
		Retention string `json:"retention"`
	}
	if got := e.do("PUT", ns+"/groups/g", `{"policy": "priority", "max_active": 2, "retention": "1h"}`, &g); got != 200 || g.Policy != "priority" || g.MaxActive != 2 || g.Retention != "1h0m0s" {
		t.Fatalf("put: %d %+v", got, g)
	}
	for _, id := range []string{"a", "b", "c"} {
		e.do("POST", ns+"/groups/g/runs", `{"id": "`+id+`"}`, nil)
	}
	var d struct {
		Queue      []runJSON `json:"queue"`
		QueueTotal int64     `json:"queue_total"`
		Active     []runJSON `json:"active_runs"`
	}
	if got := e.do("GET", ns+"/groups/g", "", &d); got != 200 || d.QueueTotal != 3 || len(d.Queue) != 3 || d.Queue[0].ID != "a" {
		t.Fatalf("get: %d %+v", got, d)
	}
	var list struct {
		Groups []struct {
			Name    string `json:"name"`
			Waiting int    `json:"waiting"`
		} `json:"groups"`
	}
	if got := e.do("GET", ns+"/groups", "", &list); got != 200 || len(list.Groups) != 1 || list.Groups[0].Waiting != 3 {
		t.Fatalf("list: %d %+v", got, list)
	}
	var dr struct {
		Policy string `json:"policy"`
		Valid  bool   `json:"valid"`
		Diff   []struct {
			Run, Active, Candidate string
		} `json:"diff"`
		Active struct {
			Policy string `json:"policy"`
		} `json:"active"`
	}
	if got := e.do("POST", ns+"/groups/g/dry-run", `{"policy": "wait"}`, &dr); got != 200 || !dr.Valid || !strings.HasPrefix(dr.Active.Policy, "priority") || len(dr.Diff) == 0 {
		t.Fatalf("dry-run: %d %+v", got, dr)
	}
	e.fails(404, "not_found", "not found", "GET", ns+"/groups/nosuch", "")
	e.fails(404, "not_found", "not found", "POST", ns+"/groups/nosuch/dry-run", `{"policy": "wait"}`)
	e.fails(422, "unprocessable", "policy nosuchpolicy is neither a serial built-in (discard, priority, wait) nor pushed", "POST", ns+"/groups/g/dry-run", `{"policy": "nosuchpolicy"}`)
	e.fails(422, "unprocessable", "policy fifo is an allocation policy; a group needs a serial one", "POST", ns+"/groups/g/dry-run", `{"policy": "fifo"}`)
	e.fails(422, "unprocessable", "reuse", "POST", ns+"/groups/g/dry-run", `{"policy": "reuse"}`)
	e.fails(400, "invalid", "policy is required", "POST", ns+"/groups/g/dry-run", `{}`)
	e.fails(422, "unprocessable", "nosuchpolicy", "PUT", ns+"/groups/g", `{"policy": "nosuchpolicy"}`)
	e.fails(400, "invalid", "max_active", "PUT", ns+"/groups/g", `{"max_active": 100000}`)
	e.fails(400, "invalid", `retention "-7s": want a duration (36h), whole days (7d) or forever, or default`, "PUT", ns+"/groups/g", `{"retention": "-7s"}`)
	if e.do("GET", ns+"/groups/g", "", &g); g.MaxActive != 2 || g.Policy != "priority" {
		t.Fatalf("group changed by refused requests: %+v", g)
	}
}

func TestAPI_cluster(t *testing.T) {
	e := newEnv(t, opts{engine: true})
	var l struct {
		Identity string `json:"identity"`
		Epoch    int64  `json:"epoch"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.do("GET", ns+"/leader", "", &l); l.Identity == "" && time.Now().Before(deadline); e.do("GET", ns+"/leader", "", &l) {
		time.Sleep(20 * time.Millisecond)
	}
	if l.Identity == "" || l.Epoch < 1 {
		t.Fatalf("leader: %+v", l)
	}
	var s struct {
		Workers []struct {
			Alive bool `json:"alive"`
		} `json:"workers"`
		Free int `json:"free"`
	}
	for e.do("GET", ns+"/slots", "", &s); len(s.Workers) == 0 && time.Now().Before(deadline); e.do("GET", ns+"/slots", "", &s) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(s.Workers) != 1 || !s.Workers[0].Alive || s.Free != 4 {
		t.Fatalf("slots: %+v", s)
	}
	var ov struct {
		Namespace string `json:"namespace"`
		Groups    int    `json:"groups"`
	}
	if got := e.do("GET", ns+"/overview", "", &ov); got != 200 || ov.Namespace != "ns" {
		t.Fatalf("overview: %d %+v", got, ov)
	}
	var nss struct {
		Namespaces []string `json:"namespaces"`
	}
	if got := e.do("GET", "/api/v1/namespaces", "", &nss); got != 200 || len(nss.Namespaces) != 1 || nss.Namespaces[0] != "ns" {
		t.Fatalf("namespaces: %d %+v", got, nss)
	}
	// a run goes through, and its record names the decision
	var r runJSON
	e.do("POST", ns+"/groups/g/runs", `{"id": "go", "duration_ms": 20}`, &r)
	for e.do("GET", ns+"/runs/go", "", &r); r.State != "SUCCEEDED" && time.Now().Before(deadline.Add(10*time.Second)); e.do("GET", ns+"/runs/go", "", &r) {
		time.Sleep(20 * time.Millisecond)
	}
	if r.State != "SUCCEEDED" || r.Decision == nil || r.Decision.Action != "launch" || r.Decision.Policy != "wait" {
		t.Fatalf("run: %+v", r)
	}
}

// pushTwoVersions pushes and activates two versions of "priority" (the
// built-in's bytes, then wait's): v2 is active.
func pushTwoVersions(t *testing.T, st *storage.Store) {
	t.Helper()
	ctx := context.Background()
	for i, src := range []string{"priority", "wait"} {
		b, ok := plugins.Builtin(src)
		if !ok {
			t.Fatal(src)
		}
		if _, err := st.PushPolicy(ctx, storage.PushRequest{Name: "priority", Kind: "serial", Blob: b, Who: "test", Note: fmt.Sprint("v", i+1), Activate: true}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAPI_policies(t *testing.T) {
	e := newEnv(t, opts{})
	pushTwoVersions(t, e.st)
	var list struct {
		Policies []struct {
			Name    string `json:"name"`
			Active  int    `json:"active"`
			Builtin bool   `json:"builtin"`
		} `json:"policies"`
	}
	if got := e.do("GET", ns+"/policies", "", &list); got != 200 || len(list.Policies) != 7 || list.Policies[3].Name != "priority" || list.Policies[3].Active != 2 {
		t.Fatalf("policies: %d %+v", got, list)
	}
	var act struct {
		Active int `json:"active"`
	}
	if got := e.do("POST", ns+"/policies/priority/activate", `{"version": 1}`, &act); got != 200 || act.Active != 1 {
		t.Fatalf("activate: %d %+v", got, act)
	}
	if got := e.do("POST", ns+"/policies/priority/rollback", `{"note": "back"}`, &act); got != 200 || act.Active != 2 {
		t.Fatalf("rollback: %d %+v", got, act)
	}
	e.fails(404, "not_found", "", "POST", ns+"/policies/priority/activate", `{"version": 9}`)
	e.fails(404, "not_found", "", "POST", ns+"/policies/nosuch/rollback", `{}`)
	e.fails(400, "invalid", "version", "POST", ns+"/policies/priority/activate", `{}`)
	e.fails(400, "invalid", "version", "POST", ns+"/policies/priority/activate", `{"version": -1}`)
	// version 0: back to the built-in priority; a rollback returns to 2
	if got := e.do("POST", ns+"/policies/priority/activate", `{"version": 0}`, &act); got != 200 || act.Active != 0 {
		t.Fatalf("activate 0: %d %+v", got, act)
	}
	if got := e.do("POST", ns+"/policies/priority/rollback", `{}`, &act); got != 200 || act.Active != 2 {
		t.Fatalf("rollback from 0: %d %+v", got, act)
	}
}

// TestAPI_auth: with tokens, no token or an unknown one is 401, a read
// token may read but not write (403), an admin token may do both; the UI
// login sets an HttpOnly cookie that authorizes like the bearer token;
// Reload picks up a changed file and keeps the old tokens on a bad one.
func TestAPI_auth(t *testing.T) {
	e := newEnv(t, opts{tokens: true})
	e.tok = ""
	e.fails(401, "unauthorized", "token is required", "GET", ns+"/runs", "")
	e.tok = "wrong-token-0123456789"
	e.fails(401, "unauthorized", "unknown token", "GET", ns+"/runs", "")
	e.tok = readTok
	if got := e.do("GET", ns+"/runs", "", nil); got != 200 {
		t.Fatalf("read token GET: %d", got)
	}
	e.fails(403, "forbidden", "scope read", "POST", ns+"/groups/g/runs", `{}`)
	e.fails(403, "forbidden", "scope read", "PUT", ns+"/groups/g", `{}`)
	e.fails(403, "forbidden", "scope read", "POST", ns+"/policies/wait/rollback", `{}`)
	e.tok = adminTok
	if got := e.do("POST", ns+"/groups/g/runs", `{"id": "x"}`, nil); got != 201 {
		t.Fatalf("admin submit: %d", got)
	}
	// UI login: a cookie
	resp, err := http.Post(e.srv.URL+"/ui/login", "application/json", strings.NewReader(`{"token": "`+readTok+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "wasmsched_token" {
			ck = c
		}
	}
	if resp.StatusCode != 200 || ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %s, cookie %+v", resp.Status, ck)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+ns+"/runs/x", nil)
	req.AddCookie(ck)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET with the cookie: %v %v", resp.Status, err)
	}
	resp, _ = http.Post(e.srv.URL+"/ui/login", "application/json", strings.NewReader(`{"token": "nope"}`))
	if resp.StatusCode != 401 {
		t.Fatalf("login with a bad token: %s", resp.Status)
	}
	// the UI's static files need no token (they hold no data)
	if resp, err := http.Get(e.srv.URL + "/ui/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /ui/: %v %v", resp.Status, err)
	}
}

func TestTokens_Reload(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, p, adminTok+" admin\n")
	toks, err := api.LoadTokens(p)
	if err != nil || toks.Len() != 1 {
		t.Fatalf("load: %v %d", err, toks.Len())
	}
	writeFile(t, p, adminTok+" admin\n"+readTok+" read\n")
	if err := toks.Reload(); err != nil || toks.Len() != 2 {
		t.Fatalf("reload: %v %d", err, toks.Len())
	}
	for _, tc := range []struct{ name, file, want string }{
		{"bad scope", readTok + " write\n", "scope"},
		{"short token", "short admin\n", "at least"},
		{"one field", readTok + "\n", "TOKEN SCOPE"},
		{"empty", "# nothing\n", "no token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, p, tc.file)
			if err := toks.Reload(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload = %v, want an error naming %q", err, tc.want)
			}
			if toks.Len() != 2 {
				t.Fatalf("a bad file replaced the tokens: %d", toks.Len())
			}
		})
	}
	if _, err := api.LoadTokens(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("LoadTokens of a missing file: no error")
	}
}

// TestAPI_events: a stream sees a submitted run go WAITING -> RUNNING ->
// SUCCEEDED; a group filter keeps other groups out.
func TestAPI_events(t *testing.T) {
	e := newEnv(t, opts{engine: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+ns+"/events?group=g", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != ": subscribed" {
		t.Fatalf("first line %q", sc.Text())
	}
	e.do("POST", ns+"/groups/other/runs", `{"id": "o1"}`, nil)
	e.do("POST", ns+"/groups/g/runs", `{"id": "r1", "duration_ms": 50}`, nil)
	var states []string
	for sc.Scan() && (len(states) == 0 || states[len(states)-1] != "SUCCEEDED") {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Run   runJSON `json:"run"`
			State string  `json:"state"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.State == "" {
			t.Fatalf("event data %q: %v", data, err)
		}
		r := ev.Run
		r.State = ev.State // the state the change entered
		if r.Group != "g" {
			t.Fatalf("the group filter let %+v through", r)
		}
		if len(states) == 0 || states[len(states)-1] != r.State {
			states = append(states, r.State)
		}
	}
	got := strings.Join(states, " ")
	if !strings.HasPrefix(got, "WAITING") || !strings.HasSuffix(got, "SUCCEEDED") || !strings.Contains(got, "RUNNING") {
		t.Fatalf("states seen: %v", states)
	}
	e.fails(400, "invalid", "whitespace", "GET", ns+"/events?group=a%20b", "")
}

// TestOpenAPI_routes: every route the server answers is in openapi.json
// with its method, and every path of the file is served (not 404 "no
// route").
func TestOpenAPI_routes(t *testing.T) {
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc.OpenAPI)
	}
	spec := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			spec[strings.ToUpper(m)+" "+p] = true
		}
	}
	routes := api.Routes()
	served := map[string]bool{}
	for _, r := range routes {
		served[r] = true
		if !spec[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for r := range spec {
		if !served[r] {
			t.Errorf("openapi.json has %s, which the server does not route", r)
		}
	}
	// and the served copy is the file
	e := newEnv(t, opts{})
	resp, err := http.Get(e.srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, b) {
		t.Fatal("/api/v1/openapi.json differs from openapi.json")
	}
	// every spec path answers something other than the catch-all 404
	for r := range spec {
		method, path, _ := strings.Cut(r, " ")
		path = strings.NewReplacer("{ns}", "ns", "{g}", "g", "{id}", "x", "{name}", "wait").Replace(path)
		if strings.HasSuffix(path, "/events") {
			continue // a stream
		}
		var ae apiErr
		e.do(method, path, "{}", &ae)
		if strings.Contains(ae.Error, "no route") {
			t.Errorf("%s %s: not routed", method, path)
		}
	}
}

// TestAPI_records: the API's JSON of every record is the shared golden the
// Go client's and the CLI's tests check (internal/recordtest).
func TestAPI_records(t *testing.T) {
	ctx := context.Background()
	r := redistest.Start(t)
	st, err := storage.New(r.Client(t), recordtest.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	wasm, _ := plugins.Builtin("wait")
	recordtest.Fixture(t, ctx, st, wasm)
	s, err := api.New(ctx, api.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); _ = s.Close(context.Background()) })
	e := &env{t: t, st: st, srv: srv}
	get := func(path string) []byte {
		t.Helper()
		var raw json.RawMessage
		if got := e.do("GET", "/api/v1/namespaces/"+recordtest.Namespace+path, "", &raw); got != 200 {
			t.Fatalf("GET %s: %d %s", path, got, raw)
		}
		return raw
	}
	recordtest.Check(t, "run", get("/runs/"+recordtest.Running))
	recordtest.Check(t, "group", get("/groups/"+recordtest.Group))
	recordtest.Check(t, "slots", get("/slots"))
	recordtest.Check(t, "leader", get("/leader"))
	recordtest.Check(t, "explanation", get("/runs/"+recordtest.Waiting+"/explain"))
	recordtest.Check(t, "page", get("/runs?group="+recordtest.Group+"&limit=1"))
	recordtest.Check(t, "schedule", get("/schedules/"+recordtest.Schedule))
	var gl struct {
		Groups json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal(get("/groups"), &gl); err != nil {
		t.Fatal(err)
	}
	recordtest.Check(t, "groups", gl.Groups)
	var pl struct {
		Policies []json.RawMessage `json:"policies"`
	}
	if err := json.Unmarshal(get("/policies"), &pl); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pl.Policies {
		var n struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(p, &n) == nil && n.Name == recordtest.Policy {
			recordtest.Check(t, "policy", p)
			found = true
		}
	}
	if !found {
		t.Fatalf("no policy %s in %s", recordtest.Policy, get("/policies"))
	}
}

// TestAPI_putGroup_policyCheck: a policy pushed but never activated is
// refused (422) with the CLI's message (cmd/wasmsched
// TestGroupSet_policyMustExistAndBeSerial), and nothing changes.
func TestAPI_putGroup_policyCheck(t *testing.T) {
	e := newEnv(t, opts{})
	wasm, _ := plugins.Builtin("wait")
	if _, err := e.st.PushPolicy(context.Background(), storage.PushRequest{Name: "dormant", Kind: "serial", Blob: wasm, Who: "t"}); err != nil {
		t.Fatal(err)
	}
	e.fails(422, "unprocessable", "policy dormant has no active version in namespace ns, so its groups' runs would wait (wasmsched policy activate dormant VERSION)",
		"PUT", ns+"/groups/g", `{"policy": "dormant"}`)
	e.fails(404, "not_found", "not found", "GET", ns+"/groups/g", "")
}

// TestAPI_methodAndScheme: a routed path asked with another method is 405
// naming the methods (Allow header too); an unknown path stays 404; the
// bearer scheme is case-insensitive.
func TestAPI_methodAndScheme(t *testing.T) {
	e := newEnv(t, opts{tokens: true})
	e.fails(405, "method_not_allowed", "DELETE /api/v1/namespaces/ns/runs/x: this route takes GET", "DELETE", ns+"/runs/x", "")
	e.fails(405, "method_not_allowed", "this route takes GET, PUT", "POST", ns+"/groups/g", `{}`)
	e.fails(404, "not_found", "no route", "GET", ns+"/nope", "")
	req, _ := http.NewRequest("DELETE", e.srv.URL+ns+"/runs/x", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Allow"); got != "GET" {
		t.Fatalf("Allow = %q, want GET", got)
	}
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req, _ := http.NewRequest("GET", e.srv.URL+ns+"/runs", nil)
		req.Header.Set("Authorization", scheme+" "+readTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("Authorization: %s TOKEN: %d, want 200", scheme, resp.StatusCode)
		}
	}
}

// TestAPI_messages: errors say what is wrong in the API's terms, not Go's:
// no Go type or struct names, no package prefixes or sentinel words.
func TestAPI_messages(t *testing.T) {
	e := newEnv(t, opts{})
	for _, c := range []struct {
		status           int
		method, path, in string
		want             string
	}{
		{400, "POST", ns + "/groups/g/runs", `{"priority": "high"}`, "request body: field priority: want a number, got a JSON string"},
		{400, "POST", ns + "/groups/g/runs", `{"slots": [1]}`, "request body: field slots: want a number, got a JSON array"},
		{400, "POST", ns + "/groups/g/runs", `{"slot": 2}`, `request body: unknown field "slot" (see /api/v1/openapi.json)`},
		{400, "POST", ns + "/groups/g/runs", `{"id": }`, "request body: not valid JSON at byte 8"},
		{400, "GET", ns + "/runs?limit=5000", "", "list: limit 5000: want 1 to 1000"},
		{413, "POST", ns + "/groups/g/runs", `{"payload": "` + strings.Repeat("x", api.MaxBodyBytes) + `"}`, "the request body is over 1048576 bytes (1024 KiB)"},
	} {
		var ae apiErr
		got := e.do(c.method, c.path, c.in, &ae)
		if got != c.status || !strings.Contains(ae.Error, c.want) {
			t.Errorf("%s %s %.40s: %d %q, want %d containing %q", c.method, c.path, c.in, got, ae.Error, c.status, c.want)
		}
		for _, leak := range []string{"Go struct", "submitJSON", "storage:", "client:", "http:"} {
			if strings.Contains(ae.Error, leak) {
				t.Errorf("%s %s: %q leaks %q", c.method, c.path, ae.Error, leak)
			}
		}
		if strings.HasSuffix(ae.Error, ": invalid") {
			t.Errorf("%s %s: %q ends in the sentinel word", c.method, c.path, ae.Error)
		}
	}
	e.do("POST", ns+"/groups/g/runs", `{"id": "a"}`, nil)
	e.do("POST", ns+"/runs/a/stop", `{}`, nil)
	var ae apiErr
	if got := e.do("POST", ns+"/runs/a/stop", `{}`, &ae); got != 409 || strings.HasSuffix(ae.Error, "bad state") || strings.Contains(ae.Error, "storage:") {
		t.Errorf("stop of a final run: %d %q", got, ae.Error)
	}
}

// TestAPI_labels: a submit's labels are on the run, GET runs?label=k=v
// selects by them (all of them when repeated), a group's params are set,
// merged ("" removes one) and replaced.
func TestAPI_labels(t *testing.T) {
	e := newEnv(t, opts{})
	var run struct {
		Labels map[string]string `json:"labels"`
	}
	if got := e.do("POST", ns+"/groups/g/runs", `{"id": "a", "labels": {"ref": "main", "tenant": "acme"}}`, &run); got != 201 || run.Labels["tenant"] != "acme" {
		t.Fatalf("submit with labels: %d %+v", got, run)
	}
	e.do("POST", ns+"/groups/g/runs", `{"id": "b", "labels": {"ref": "dev"}}`, nil)
	var page struct {
		Runs []runJSON `json:"runs"`
	}
	for q, want := range map[string]string{"label=ref%3Dmain": "a", "label=ref%3Ddev": "b", "label=ref%3Dmain&label=tenant%3Dacme": "a", "label=ref%3Dmain&label=tenant%3Dx": ""} {
		page.Runs = nil
		if got := e.do("GET", ns+"/runs?"+q, "", &page); got != 200 {
			t.Fatalf("GET runs?%s: %d", q, got)
		}
		ids := ""
		for _, r := range page.Runs {
			ids += r.ID
		}
		if ids != want {
			t.Errorf("runs?%s = %q, want %q", q, ids, want)
		}
	}
	var g struct {
		Params map[string]string `json:"params"`
	}
	e.do("PUT", ns+"/groups/g", `{"params": {"period": "2s", "max_wait": "30s"}}`, &g)
	g.Params = nil // (decoding into a map merges)
	e.do("PUT", ns+"/groups/g", `{"params": {"max_wait": ""}}`, &g)
	if len(g.Params) != 1 || g.Params["period"] != "2s" {
		t.Fatalf("merged params %v", g.Params)
	}
	g.Params = nil
	e.do("PUT", ns+"/groups/g", `{"params": {"limit": "3"}, "replace_params": true}`, &g)
	if len(g.Params) != 1 || g.Params["limit"] != "3" {
		t.Fatalf("replaced params %v", g.Params)
	}
}

// TestAPI_lost: GET .../lost lists the lost-run reports workers kept, the
// newest first; a bad limit is a 400.
func TestAPI_lost(t *testing.T) {
	e := newEnv(t, opts{})
	ctx := context.Background()
	var got struct {
		Lost []storage.LostRun `json:"lost"`
	}
	if code := e.do("GET", "/api/v1/namespaces/ns/lost", "", &got); code != 200 || got.Lost == nil || len(got.Lost) != 0 {
		t.Fatalf("empty: %d %+v", code, got)
	}
	for i, id := range []string{"a", "b"} {
		if err := e.st.NoteLost(ctx, storage.LostRun{Run: id, Token: fmt.Sprintf("1-%d", i), Outcome: storage.StateSucceeded, Worker: "w#1|x", Reason: "r|s"}); err != nil {
			t.Fatal(err)
		}
	}
	if code := e.do("GET", "/api/v1/namespaces/ns/lost?limit=1", "", &got); code != 200 || len(got.Lost) != 1 ||
		got.Lost[0].Run != "b" || got.Lost[0].Worker != "w#1|x" || got.Lost[0].Reason != "r/s" || got.Lost[0].At == 0 {
		t.Fatalf("limit 1: %d %+v", code, got)
	}
	var ae apiErr
	if code := e.do("GET", "/api/v1/namespaces/ns/lost?limit=-1", "", &ae); code != 400 || !strings.Contains(ae.Error, "limit") {
		t.Fatalf("bad limit: %d %+v", code, ae)
	}
}

// TestAPI_notReplicated: a submit no replica acknowledged is a 503
// not_replicated that says so (durable=on, no replica).
func TestAPI_notReplicated(t *testing.T) {
	e := newEnv(t, opts{durableOn: true})
	var ae apiErr
	if got := e.do("POST", "/api/v1/namespaces/ns/groups/g/runs", `{"id": "a"}`, &ae); got != 503 || ae.Code != "not_replicated" ||
		!strings.Contains(ae.Error, "no replica acknowledged") {
		t.Fatalf("POST runs: %d %+v, want 503 not_replicated", got, ae)
	}
}

// TestAPI_allocation: GET and PUT .../allocation: defaults, a fair share
// with weights, refusals (422 for a policy that cannot allocate, 400 for a
// malformed setting; nothing written), and the usage of a RUNNING run.
func TestAPI_allocation(t *testing.T) {
	e := newEnv(t, opts{})
	ctx := context.Background()
	type status struct {
		Allocation client.Allocation  `json:"allocation"`
		Free       int                `json:"free"`
		Slots      int                `json:"slots"`
		By         string             `json:"by"`
		Usage      []client.SlotUsage `json:"usage"`
		Group      []client.SlotUsage `json:"group"`
	}
	var got status
	if code := e.do("GET", "/api/v1/namespaces/ns/allocation", "", &got); code != 200 || got.Allocation.Policy != "fifo" || got.By != "group" {
		t.Fatalf("default: %d %+v", code, got)
	}
	var ae apiErr
	for body, want := range map[string]int{
		`{"policy": "wait"}`:                      422,
		`{"policy": "nope"}`:                      422,
		`{"policy": "fair", "weights": {"a": 0}}`: 400,
		`{"fair_label": "Bad Key"}`:               400,
	} {
		if code := e.do("PUT", "/api/v1/namespaces/ns/allocation", body, &ae); code != want {
			t.Fatalf("%s: %d %+v, want %d", body, code, ae, want)
		}
	}
	if a, _ := e.st.Allocation(ctx); a.Policy != "" {
		t.Fatalf("a refused PUT wrote %+v", a)
	}
	if code := e.do("PUT", "/api/v1/namespaces/ns/allocation", `{"policy": "fair", "fair_label": "tenant", "weights": {"a": 2}}`, &got); code != 200 ||
		got.Allocation.Policy != "fair" || got.By != "tenant" || got.Allocation.Weights["a"] != 2 {
		t.Fatalf("put fair: %d %+v", code, got)
	}
	// a RUNNING run of tenant a holding 2 slots
	f := leadNS(t, e)
	if _, err := e.st.SetGroup(ctx, "g", "wait", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RegisterWorker(ctx, "w1", 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1", Slots: 2, Labels: []abi.Label{{Key: "tenant", Value: "a"}}}); err != nil {
		t.Fatal(err)
	}
	g, _ := e.st.GetGroup(ctx, "g")
	if _, err := storagetest.Apply(ctx, e.st, f, "g", storage.Decision{Version: g.Version, ClaimID: "c1", Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r1"}}}); err != nil {
		t.Fatal(err)
	}
	if code := e.do("GET", "/api/v1/namespaces/ns/allocation?group=g", "", &got); code != 200 || got.Free != 1 || got.Slots != 3 ||
		fmt.Sprint(got.Usage) != "[{tenant a 2 1}]" || fmt.Sprint(got.Group) != "[{tenant a 2 1}]" {
		t.Fatalf("usage: %d %+v", code, got)
	}
	var ov struct {
		Allocation status `json:"allocation"`
	}
	if code := e.do("GET", "/api/v1/namespaces/ns/overview", "", &ov); code != 200 || fmt.Sprint(ov.Allocation.Usage) != "[{tenant a 2 1}]" {
		t.Fatalf("overview: %d %+v", code, ov)
	}
}

// leadNS makes the test the namespace's leader (lock + epoch) and returns
// its fence.
func leadNS(t *testing.T, e *env) storage.Fence {
	t.Helper()
	ctx := context.Background()
	stamp := storage.NewIdentity("apitest:1")
	if err := e.st.Redis().Set(ctx, keyspace.Of(e.st).Lock(), stamp, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	epoch, err := e.st.BecomeLeader(ctx, stamp)
	if err != nil {
		t.Fatal(err)
	}
	return storage.Fence{Epoch: epoch, Holder: stamp}
}

// TestAPI_groupRequire: a group PUT sets its requirements (absent keeps
// them, {} drops them); a bad one is a 400 naming it, nothing written.
func TestAPI_groupRequire(t *testing.T) {
	e := newEnv(t, opts{})
	type grp struct {
		Version int64             `json:"version"`
		Require map[string]string `json:"require"`
	}
	var g grp
	if got := e.do("PUT", ns+"/groups/train", `{"require": {"gpu": "a100"}}`, &g); got != 200 || g.Require["gpu"] != "a100" {
		t.Fatalf("put: %d %+v", got, g)
	}
	e.fails(400, "invalid", `requirement "GPU"`, "PUT", ns+"/groups/train", `{"require": {"GPU": "x"}}`)
	var kept grp
	if got := e.do("PUT", ns+"/groups/train", `{"max_active": 3}`, &kept); got != 200 || kept.Require["gpu"] != "a100" || kept.Version != 2 {
		t.Fatalf("absent require: %d %+v, want kept (and the bad PUT wrote nothing: version 2)", got, kept)
	}
	var none grp
	if got := e.do("PUT", ns+"/groups/train", `{"require": {}}`, &none); got != 200 || none.Require != nil {
		t.Fatalf("require {}: %d %+v, want none", got, none)
	}
	// a run's own requirements
	var run struct {
		Require map[string]string `json:"require"`
	}
	if got := e.do("POST", ns+"/groups/train/runs", `{"id": "r1", "require": {"zone": "eu"}}`, &run); got != 201 || run.Require["zone"] != "eu" {
		t.Fatalf("submit with require: %d %+v", got, run)
	}
	e.fails(400, "invalid", `requirement "Zone"`, "POST", ns+"/groups/train/runs", `{"id": "r2", "require": {"Zone": "eu"}}`)
	e.fails(404, "not_found", "r2", "GET", ns+"/runs/r2", "")
	// same worker, on the group and on a run
	var same struct {
		SameWorker bool `json:"same_worker"`
	}
	if got := e.do("PUT", ns+"/groups/train", `{"same_worker": true}`, &same); got != 200 || !same.SameWorker {
		t.Fatalf("put same_worker: %d %+v", got, same)
	}
	var sameRun struct {
		SameWorker bool `json:"same_worker"`
	}
	if got := e.do("POST", ns+"/groups/train/runs", `{"id": "r3", "slots": 2, "same_worker": true}`, &sameRun); got != 201 || !sameRun.SameWorker {
		t.Fatalf("submit same_worker: %d %+v", got, sameRun)
	}
	// preferences, on the group and on a run; bad ones 400, nothing written
	var pg struct {
		Version int64    `json:"version"`
		Prefer  []string `json:"prefer"`
	}
	if got := e.do("PUT", ns+"/groups/train", `{"prefer": ["region=eu:10", "disk=ssd"]}`, &pg); got != 200 || fmt.Sprint(pg.Prefer) != "[disk=ssd:1 region=eu:10]" {
		t.Fatalf("put prefer: %d %+v", got, pg)
	}
	e.fails(400, "invalid", "the weight must be an integer 1..1000", "PUT", ns+"/groups/train", `{"prefer": ["region=eu:0"]}`)
	e.fails(400, "invalid", `preference "noeq"`, "POST", ns+"/groups/train/runs", `{"id": "r4", "prefer": ["noeq"]}`)
	e.fails(404, "not_found", "r4", "GET", ns+"/runs/r4", "")
	var pr struct {
		Prefer []string `json:"prefer"`
	}
	if got := e.do("POST", ns+"/groups/train/runs", `{"id": "r5", "prefer": ["region=us:20"]}`, &pr); got != 201 || fmt.Sprint(pr.Prefer) != "[region=us:20]" {
		t.Fatalf("submit with prefer: %d %+v", got, pr)
	}
	var pnone struct {
		Prefer []string `json:"prefer"`
	}
	if got := e.do("PUT", ns+"/groups/train", `{"prefer": []}`, &pnone); got != 200 || pnone.Prefer != nil {
		t.Fatalf("prefer []: %d %+v, want none", got, pnone)
	}
	e.fails(400, "invalid", "same_worker", "PUT", ns+"/groups/train", `{"same_worker": "yes"}`)
}
