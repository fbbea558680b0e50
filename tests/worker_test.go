package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// The Go worker library end to end: examples/go-worker (an application's
// own worker binary) and `wasmsched worker --exec`, with real serve and
// redis-server processes.

var goWorker struct {
	once sync.Once
	path string
	err  error
}

// goWorkerBinary builds examples/go-worker once per test binary.
func goWorkerBinary(t *testing.T) string {
	t.Helper()
	goWorker.once.Do(func() {
		dir, err := os.MkdirTemp("", "go-worker-")
		if err != nil {
			goWorker.err = err
			return
		}
		goWorker.path = filepath.Join(dir, "go-worker")
		out, err := exec.Command("go", "build", "-o", goWorker.path, "github.com/wasmsched/wasmsched/examples/go-worker").CombinedOutput()
		if err != nil {
			goWorker.err = fmt.Errorf("go build examples/go-worker: %v: %s", err, out)
		}
	})
	if goWorker.err != nil {
		t.Fatal(goWorker.err)
	}
	return goWorker.path
}

// GoWorker starts examples/go-worker with a journal.
func GoWorker(t *testing.T, name string, r *redistest.Server, ns, advertise string, extra ...string) (*Proc, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), name+".journal")
	args := append([]string{"--redis", r.URL(), "--namespace", ns, "--advertise", advertise,
		"--heartbeat-ttl", rtHeartbeatTTL.String(), "--journal", journal}, extra...)
	p := startBinary(t, goWorkerBinary(t), name, args...)
	p.WaitLog(t, 10*time.Second, "worker registered")
	return p, journal
}

// waitStarted waits (15 s at most) until worker w has started each run
// (its "run started" line): a run is RUNNING once its slots are assigned,
// and the worker executes it when it picks the assignment up, later on a
// loaded machine; a signal before that finds no run in flight.
func waitStarted(t *testing.T, w *Proc, runs ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, id := range runs {
		for len(w.LogsMatching(`msg="run started" run=`+id+" ")) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not start run %s in 15 s", w.Name, id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestGoWorker_handlers: a handler's result is on the run; an error
// fails it (retried while attempts are left); a panic fails it with its
// message; a result over 64 KiB fails it; a handler's context is
// cancelled by an operator's stop and by a priority policy's stop (both
// STOPPED).
func TestGoWorker_handlers(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "gohandlers"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7801")
	_, journal := GoWorker(t, "w", r, ns, "127.0.0.1:7811", "--slots", "4")
	SetGroup(t, r, ns, "sleep", "priority", 1)

	Submit(t, r, ns, "echo", "e1", "--payload", "hi there")
	Submit(t, r, ns, "fail", "f1", "--payload", "nope", "--max-attempts", "2", "--retry-backoff", "100ms")
	Submit(t, r, ns, "panic", "p1")
	Submit(t, r, ns, "big", "b1")
	Submit(t, r, ns, "other", "o1")
	if run := WaitRunState(t, st, "e1", 15*time.Second, storage.StateSucceeded); run.Result != "hi there" {
		t.Errorf("echo result %q", run.Result)
	}
	if run := WaitRunState(t, st, "f1", 15*time.Second, storage.StateFailed); run.Attempt != 2 || run.Reason != "attempt 2 of 2: nope" {
		t.Errorf("fail: attempt %d, reason %q", run.Attempt, run.Reason)
	}
	if run := WaitRunState(t, st, "p1", 15*time.Second, storage.StateFailed); run.Reason != "panic: boom" {
		t.Errorf("panic: reason %q", run.Reason)
	}
	if run := WaitRunState(t, st, "b1", 15*time.Second, storage.StateFailed); !strings.Contains(run.Reason, "at most 65536") || run.Result != "" {
		t.Errorf("big: reason %q, result %d bytes", run.Reason, len(run.Result))
	}
	if run := WaitRunState(t, st, "o1", 15*time.Second, storage.StateFailed); !strings.Contains(run.Reason, "no handler for group other") {
		t.Errorf("other: reason %q", run.Reason)
	}
	// stops: the priority policy stops s1 when s2 arrives; the CLI stops s2
	Submit(t, r, ns, "sleep", "s1", "--payload", "1h")
	WaitRunState(t, st, "s1", 15*time.Second, storage.StateRunning)
	Submit(t, r, ns, "sleep", "s2", "--payload", "1h")
	if run := WaitRunState(t, st, "s1", 15*time.Second, storage.StateStopped); run.Decision == nil || run.Decision.Action != storage.ActionStop {
		t.Errorf("s1 stopped without the policy's stop decision: %+v", run.Decision)
	}
	WaitRunState(t, st, "s2", 15*time.Second, storage.StateRunning)
	cli(t, r, ns, "run", "stop", "s2", "--reason", "enough")
	if run := WaitRunState(t, st, "s2", 15*time.Second, storage.StateStopped); run.Reason != "enough" {
		t.Errorf("s2: reason %q", run.Reason)
	}
	if out := cli(t, r, ns, "run", "show", "e1"); !strings.Contains(out, "RESULT") || !strings.Contains(out, "hi there") {
		t.Errorf("run show lacks the result:\n%s", out)
	}
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"w": journal}))
	for id, n := range map[string]int{"e1": 1, "f1": 2, "p1": 1, "s1": 1, "s2": 1} {
		if len(ex[id]) != n {
			t.Errorf("run %s executed %d times, want %d", id, len(ex[id]), n)
		}
	}
}

// TestGoWorker_drain: SIGTERM drains: the runs in flight finish
// (SUCCEEDED, not interrupted), nothing new is placed on the worker, and
// it exits 0 deregistered; a run still in flight at the drain timeout is
// interrupted: retried when it has attempts left, FAILED "interrupted by
// worker shutdown" when not.
func TestGoWorker_drain(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "godrain"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7802")
	SetGroup(t, r, ns, "sleep", "wait", 4)
	w, journal := GoWorker(t, "w", r, ns, "127.0.0.1:7812", "--slots", "2", "--drain-timeout", "10s")
	Submit(t, r, ns, "sleep", "a", "--payload", "1500ms", "--max-attempts", "3")
	Submit(t, r, ns, "sleep", "b", "--payload", "1500ms")
	WaitRunState(t, st, "a", 15*time.Second, storage.StateRunning)
	WaitRunState(t, st, "b", 15*time.Second, storage.StateRunning)
	waitStarted(t, w, "a", "b")
	w.Signal(syscall.SIGTERM)
	w.WaitLog(t, 5*time.Second, "draining: taking no new runs")
	Submit(t, r, ns, "sleep", "c", "--payload", "10ms")
	if code := w.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("drained worker exited %d", code)
	}
	for _, id := range []string{"a", "b"} {
		if run, err := st.GetRun(testCtx(t, 5*time.Second), id); err != nil || run.State != storage.StateSucceeded || run.Attempt != 1 {
			t.Errorf("in-flight run %s after the drain: %+v %v", id, run.State, err)
		}
	}
	if run, _ := st.GetRun(testCtx(t, 5*time.Second), "c"); run.State == storage.StateRunning || run.State.Final() {
		t.Errorf("run c went to the draining worker: %s", run.State)
	}
	if s := Slots(t, r, ns); len(s.Workers) != 0 {
		t.Errorf("the drained worker is still registered: %+v", s.Workers)
	}
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"w": journal}))
	if len(ex["a"]) != 1 || len(ex["b"]) != 1 || len(ex["c"]) != 0 {
		t.Errorf("executions %v", ex)
	}

	// a drain that times out interrupts: a retry when attempts are left
	w2, _ := GoWorker(t, "w2", r, ns, "127.0.0.1:7813", "--slots", "2", "--drain-timeout", "300ms")
	WaitRunState(t, st, "c", 15*time.Second, storage.StateSucceeded)
	Submit(t, r, ns, "sleep", "long-retried", "--payload", "1h", "--max-attempts", "3", "--retry-backoff", "1h")
	Submit(t, r, ns, "sleep", "long-once", "--payload", "1h")
	WaitRunState(t, st, "long-retried", 15*time.Second, storage.StateRunning)
	WaitRunState(t, st, "long-once", 15*time.Second, storage.StateRunning)
	waitStarted(t, w2, "long-retried", "long-once")
	w2.Signal(syscall.SIGTERM)
	if code := w2.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("worker exited %d after its drain timeout", code)
	}
	if run := WaitRunState(t, st, "long-once", 10*time.Second, storage.StateFailed); run.Reason != "interrupted by worker shutdown" {
		t.Errorf("long-once: reason %q", run.Reason)
	}
	if run := WaitRunState(t, st, "long-retried", 10*time.Second, storage.StateWaiting); run.Attempt != 2 || !strings.Contains(run.Reason, "interrupted by worker shutdown") {
		t.Errorf("long-retried: attempt %d, reason %q: want its retry waiting", run.Attempt, run.Reason)
	}
}

// TestGoWorker_kill9: a library worker killed with -9 mid-run: the run
// (with retries) is recovered on the other worker as its next attempt;
// no attempt executes twice.
func TestGoWorker_kill9(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "gokill"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7803")
	wa, ja := GoWorker(t, "wa", r, ns, "127.0.0.1:7814", "--slots", "1")
	Submit(t, r, ns, "sleep", "k1", "--payload", "1500ms", "--max-attempts", "3", "--retry-backoff", "100ms")
	WaitRunState(t, st, "k1", 15*time.Second, storage.StateRunning)
	_, jb := GoWorker(t, "wb", r, ns, "127.0.0.1:7815", "--slots", "1")
	wa.Kill()
	run := WaitRunState(t, st, "k1", 30*time.Second, storage.StateSucceeded)
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"wa": ja, "wb": jb}))
	seen := map[int]bool{}
	for _, e := range ex["k1"] {
		if seen[e.Attempt] {
			t.Errorf("attempt %d executed twice: %+v", e.Attempt, ex["k1"])
		}
		seen[e.Attempt] = true
	}
	onB := slices.IndexFunc(ex["k1"], func(e Execution) bool { return e.Attempt == 2 && e.Worker == "wb" }) >= 0
	if run.Attempt != 2 || len(ex["k1"]) != 2 || !onB {
		t.Errorf("k1: attempt %d, executions %+v: want attempt 2 on wb", run.Attempt, ex["k1"])
	}
}

// TestExecWorker_hygiene: `worker --exec` refuses a missing or
// non-executable program (exit 2, nothing registered); the program does
// not get WASMSCHED_REDIS nor what --exec-env-deny names, gets the run's
// variables, and its exit code and last output are on the run.
func TestExecWorker_hygiene(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "exechyg"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7804")
	notExec := filepath.Join(t.TempDir(), "plain.txt")
	if err := os.WriteFile(notExec, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"./does-not-exist.sh", notExec} {
		_, stderr, code := RunCLIErr(t, "--redis", r.URL(), "-n", ns, "worker", "--exec", prog, "--advertise", "127.0.0.1:1")
		if code != 2 || !strings.Contains(stderr, prog) {
			t.Errorf("worker --exec %s: exit %d, stderr %q: want 2 naming it", prog, code, stderr)
		}
	}
	if s := Slots(t, r, ns); len(s.Workers) != 0 {
		t.Fatalf("a refused worker registered: %+v", s.Workers)
	}
	envFile := filepath.Join(t.TempDir(), "env")
	prog := script(t, "env.sh", "env > "+envFile+"\necho line one\necho line two >&2\nexit 3\n")
	journal := filepath.Join(t.TempDir(), "w.journal")
	p := startBinaryEnv(t, Binary(t), "w", []string{"WASMSCHED_REDIS=" + r.URL(), "SECRET_TOKEN=s3cr3t", "KEEP_ME=yes"},
		"-n", ns, "worker", "--exec", prog, "--advertise", "127.0.0.1:7816", "--heartbeat-ttl", rtHeartbeatTTL.String(),
		"--journal", journal, "--exec-env-deny", "WASMSCHED_REDIS,SECRET_*")
	p.WaitLog(t, 10*time.Second, "worker registered")
	Submit(t, r, ns, "g", "x1", "--payload", "the payload")
	run := WaitRunState(t, st, "x1", 15*time.Second, storage.StateFailed)
	if run.ExitCode == nil || *run.ExitCode != 3 || !strings.Contains(run.Output, "line one") || !strings.Contains(run.Output, "line two") {
		t.Errorf("run x1: exit code %v, output %q", run.ExitCode, run.Output)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, bad := range []string{"WASMSCHED_REDIS=", "SECRET_TOKEN="} {
		if strings.Contains(env, bad) {
			t.Errorf("the program got %s", bad)
		}
	}
	for _, good := range []string{"KEEP_ME=yes", "WASMSCHED_RUN_ID=x1", "WASMSCHED_PAYLOAD=the payload", "WASMSCHED_ATTEMPT=1"} {
		if !strings.Contains(env, good) {
			t.Errorf("the program lacks %s", good)
		}
	}
	if out := cli(t, r, ns, "run", "show", "x1"); !strings.Contains(out, "EXIT CODE") || !strings.Contains(out, "line two") {
		t.Errorf("run show lacks the exit code or output:\n%s", out)
	}
}

// TestGoWorker_secondSignal: a second SIGTERM ends a drain at once: the
// run in flight is interrupted (FAILED "interrupted by worker shutdown")
// long before the drain timeout, and the worker exits 0.
func TestGoWorker_secondSignal(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "gosecond"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7805")
	w, _ := GoWorker(t, "w", r, ns, "127.0.0.1:7817", "--drain-timeout", "10m")
	Submit(t, r, ns, "sleep", "z1", "--payload", "1h")
	WaitRunState(t, st, "z1", 15*time.Second, storage.StateRunning)
	waitStarted(t, w, "z1")
	w.Signal(syscall.SIGTERM)
	w.WaitLog(t, 5*time.Second, "draining: taking no new runs")
	w.Signal(syscall.SIGTERM)
	if code := w.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("worker exited %d", code)
	}
	if run := WaitRunState(t, st, "z1", 10*time.Second, storage.StateFailed); run.Reason != "interrupted by worker shutdown" {
		t.Errorf("z1: reason %q", run.Reason)
	}
}
