package tests

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

const (
	httpAdminTok  = "http-admin-token-0123456789"
	httpReadTok   = "http-read-token-0123456789"
	httpWorkerTok = "http-worker-token-0123456789"
)

// python3 is the interpreter the Python package's tests run with: the
// test command installs it when missing, and without it these tests fail.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed (scripts/test installs it): the Python package cannot be tested")
	}
	return p
}

// node is the Node.js the TypeScript package's tests run with (the test
// command installs it when missing).
func node(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (scripts/test installs it): the TypeScript package cannot be tested")
	}
	return p
}

// TestTypeScriptPackage runs the TypeScript package's own tests (node
// --test in client/typescript: what its npm test runs).
func TestTypeScriptPackage(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(node(t), "--test", "test/")
	cmd.Dir = filepath.Join("..", "client", "typescript")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
}

// TestPythonPackage runs the Python package's own tests (python3 -m
// unittest in client/python: the client and the worker against a
// stand-in server).
func TestPythonPackage(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(python3(t), "-m", "unittest", "-v")
	cmd.Dir = filepath.Join("..", "client", "python")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
}

// httpWorkerEnv starts redis-server and a serve with the API on a token
// file (admin, read and worker tokens), and returns the API's URL.
func httpWorkerEnv(t *testing.T, ns string, base int) (*redistest.Server, string, *client.Client) {
	t.Helper()
	r := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(httpAdminTok+" admin\n"+httpReadTok+" read\n"+httpWorkerTok+" worker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("127.0.0.1:%d", base+1)
	Serve(t, "host", r, ns, fmt.Sprintf("127.0.0.1:%d", base), rtLeaseTTL, "--api-addr", api, "--api-tokens", file)
	url := "http://" + api
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url + "/api/v1/openapi.json"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the API did not come up in 10 s")
		}
	}
	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	return r, url, c
}

// startHTTPWorker starts an example worker of a package (interpreter,
// script under client/) for group with the worker token, its journal (one
// line per execution) and a 2 s heartbeat TTL, and waits for it to
// register.
func startHTTPWorker(t *testing.T, interpreter, script, group, url, ns, name string, extra ...string) (*Proc, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), name+".journal")
	env := []string{"WASMSCHED_URL=" + url, "WASMSCHED_TOKEN=" + httpWorkerTok, "WASMSCHED_NAMESPACE=" + ns, "WASMSCHED_JOURNAL=" + journal}
	args := append([]string{filepath.Join("..", "client", script), "--group", group, "--name", name, "--heartbeat-ttl", "2"}, extra...)
	p := startBinaryEnv(t, interpreter, name, env, args...)
	p.WaitLog(t, 15*time.Second, "registered as")
	return p, journal
}

// startPython starts the Python package's example worker for group py.
func startPython(t *testing.T, url, ns, name string, extra ...string) (*Proc, string) {
	t.Helper()
	return startHTTPWorker(t, python3(t), filepath.Join("python", "examples", "worker.py"), "py", url, ns, name, extra...)
}

// startNode starts the TypeScript package's example worker for group ts.
func startNode(t *testing.T, url, ns, name string, extra ...string) (*Proc, string) {
	t.Helper()
	return startHTTPWorker(t, node(t), filepath.Join("typescript", "examples", "worker.mjs"), "ts", url, ns, name, extra...)
}

// TestHTTPWorker_node, on real processes: runs of a group handled by the
// TypeScript worker SUCCEED with their results beside a Python worker's
// group; a handler's throw is retried and FAILS after its attempts; a stop
// aborts the handler's signal (STOPPED); SIGTERM drains.
func TestHTTPWorker_node(t *testing.T) {
	t.Parallel()
	const ns = "httpn"
	r, url, c := httpWorkerEnv(t, ns, 7861)
	cli(t, r, ns, "group", "set", "ts", "--max-active", "10")
	cli(t, r, ns, "group", "set", "py", "--max-active", "10")
	n1, j1 := startNode(t, url, ns, "ts1", "--slots", "3")
	_, j2 := startPython(t, url, ns, "py1", "--slots", "3")
	var ids []string
	for i := range 10 {
		for _, g := range []string{"ts", "py"} {
			id := fmt.Sprintf("%s-%02d", g, i)
			if _, err := c.Submit(testCtx(t, 5*time.Second), g, client.SubmitOptions{ID: id, Payload: "hi " + id}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	for id, run := range waitFinal(t, c, 60*time.Second, ids...) {
		if run.State != "SUCCEEDED" || run.Result != strings.ToUpper("hi "+id) {
			t.Errorf("%s: %s %q (%s), want SUCCEEDED with its payload upper-cased", id, run.State, run.Result, run.Reason)
		}
	}
	byRun := ExecutionsByRun(ReadJournals(t, map[string]string{"ts1": j1, "py1": j2}))
	for _, id := range ids {
		if ex := byRun[id]; len(ex) != 1 || ex[0].Worker != map[byte]string{'t': "ts1", 'p': "py1"}[id[0]] {
			t.Errorf("%s executions %+v, want one, on its group's worker", id, ex)
		}
	}
	if _, err := c.Submit(testCtx(t, 5*time.Second), "ts", client.SubmitOptions{ID: "fail-1", Payload: "fail", MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if run := waitFinal(t, c, 30*time.Second, "fail-1")["fail-1"]; run.State != "FAILED" || run.Attempt != 2 || !strings.Contains(run.Reason, "asked to fail") {
		t.Fatalf("fail-1: %s attempt %d %q, want FAILED after 2 attempts with the handler's error", run.State, run.Attempt, run.Reason)
	}
	if _, err := c.Submit(testCtx(t, 5*time.Second), "ts", client.SubmitOptions{ID: "stop-1", Payload: "sleep:30"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "stop-1", "RUNNING")
	if _, err := c.Stop(testCtx(t, 5*time.Second), "stop-1", "enough"); err != nil {
		t.Fatal(err)
	}
	if run := waitFinal(t, c, 15*time.Second, "stop-1")["stop-1"]; run.State != "STOPPED" {
		t.Fatalf("stop-1: %s %q, want STOPPED", run.State, run.Reason)
	}
	checkDrain(t, c, "ts", n1)
}

// checkDrain submits a 1.5 s run to group, SIGTERMs p (its worker) while
// the run is RUNNING, and checks the drain: p exits 0, the run SUCCEEDED
// with the progress its handler reported.
func checkDrain(t *testing.T, c *client.Client, group string, p *Proc) {
	t.Helper()
	if _, err := c.Submit(testCtx(t, 5*time.Second), group, client.SubmitOptions{ID: "drain-1", Payload: "sleep:1.5"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "drain-1", "RUNNING")
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0", p.Name, code)
	}
	if run := waitFinal(t, c, 10*time.Second, "drain-1")["drain-1"]; run.State != "SUCCEEDED" || run.Result != "slept" {
		t.Fatalf("drain-1: %s %q (%s), want SUCCEEDED: a drain lets the run in flight finish", run.State, run.Result, run.Reason)
	} else if run.Progress == nil || run.Progress.Message != "sleeping" {
		t.Fatalf("drain-1's progress %+v, want the handler's \"sleeping\"", run.Progress)
	}
}

// TestHTTPWorker_python, on real processes: runs of a group handled by a
// Python worker over the HTTP API SUCCEED with their results; a handler
// error is retried and FAILS after its attempts; a stop ends a running
// handler (STOPPED); kill -9 of the Python worker mid-run: the run is
// retried on another Python worker, no attempt executed twice (journals);
// SIGTERM drains (the run in flight finishes, the process exits 0); a read
// token cannot register a worker.
func TestHTTPWorker_python(t *testing.T) {
	t.Parallel()
	const ns = "httpw"
	r, url, c := httpWorkerEnv(t, ns, 7851)
	cli(t, r, ns, "group", "set", "py", "--max-active", "10")
	p1, j1 := startPython(t, url, ns, "py1", "--slots", "2")
	journals := map[string]string{"py1": j1}
	submit := func(id, payload string, o client.SubmitOptions) {
		t.Helper()
		o.ID, o.Payload = id, payload
		if _, err := c.Submit(testCtx(t, 5*time.Second), "py", o); err != nil {
			t.Fatal(err)
		}
	}

	// 1: results
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("ok-%02d", i)
		submit(id, fmt.Sprintf("hello %d", i), client.SubmitOptions{})
		ids = append(ids, id)
	}
	for id, run := range waitFinal(t, c, 60*time.Second, ids...) {
		if run.State != "SUCCEEDED" || !strings.HasPrefix(run.Result, "HELLO ") {
			t.Errorf("%s: %s %q (%s), want SUCCEEDED with the payload upper-cased", id, run.State, run.Result, run.Reason)
		}
	}

	// 2: an error, retried, FAILED after its attempts
	submit("fail-1", "fail", client.SubmitOptions{MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond})
	if run := waitFinal(t, c, 30*time.Second, "fail-1")["fail-1"]; run.State != "FAILED" || run.Attempt != 2 ||
		!strings.Contains(run.Reason, "asked to fail") {
		t.Fatalf("fail-1: %s attempt %d %q, want FAILED after 2 attempts with the handler's error", run.State, run.Attempt, run.Reason)
	}

	// 3: a stop ends a running handler
	submit("stop-1", "sleep:30", client.SubmitOptions{})
	waitState(t, c, "stop-1", "RUNNING")
	if _, err := c.Stop(testCtx(t, 5*time.Second), "stop-1", "enough"); err != nil {
		t.Fatal(err)
	}
	if run := waitFinal(t, c, 15*time.Second, "stop-1")["stop-1"]; run.State != "STOPPED" {
		t.Fatalf("stop-1: %s %q, want STOPPED", run.State, run.Reason)
	}

	// 4: kill -9 of the Python worker mid-run: retried on another one
	submit("kill-1", "sleep:2", client.SubmitOptions{MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond})
	waitState(t, c, "kill-1", "RUNNING")
	p2, j2 := startPython(t, url, ns, "py2", "--slots", "2")
	journals["py2"] = j2
	p1.Kill()
	p1.Wait(t, 10*time.Second)
	run := waitFinal(t, c, 60*time.Second, "kill-1")["kill-1"]
	if run.State != "SUCCEEDED" || run.Attempt != 2 || len(run.Attempts) < 1 || !strings.Contains(run.Attempts[0].Reason, "missed its heartbeat TTL") {
		t.Fatalf("kill-1: %s attempt %d %+v, want SUCCEEDED on attempt 2 after the first was given up", run.State, run.Attempt, run.Attempts)
	}
	byRun := ExecutionsByRun(ReadJournals(t, journals))
	for id, ex := range byRun {
		seen := map[int]bool{}
		for _, e := range ex {
			if seen[e.Attempt] {
				t.Errorf("%s: attempt %d executed twice: %+v", id, e.Attempt, ex)
			}
			seen[e.Attempt] = true
		}
	}
	if ex := byRun["kill-1"]; len(ex) != 2 || ex[0].Worker == ex[1].Worker {
		t.Errorf("kill-1 executions %+v, want one on py1 and one on py2", ex)
	}

	// 5: SIGTERM drains: the run in flight finishes, the process exits 0
	checkDrain(t, c, "py", p2)

	// 6: a read token cannot register a worker
	req, _ := http.NewRequest("POST", url+"/api/v1/namespaces/"+ns+"/workers", strings.NewReader(`{"slots": 1}`))
	req.Header.Set("Authorization", "Bearer "+httpReadTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("register with a read token: %d, want 403", resp.StatusCode)
	}
}
