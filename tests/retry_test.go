package tests

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// TestRetry_endToEnd, on real processes (redis-server, serve, the CLI) and
// a library worker whose handler fails a run's first N attempts (payload
// "fail:N"): a run that failed 3 of 3 attempts is in the FAILED list; `run
// retry` makes it SUCCEED on attempt 4 with its earlier attempts still in
// its record; `group retry G --state FAILED --label tenant=a` retries
// exactly those; retrying a RUNNING run exits 2 and changes nothing.
func TestRetry_endToEnd(t *testing.T) {
	t.Parallel()
	const ns = "retry"
	r, c, h := retryEnv(t, ns, "127.0.0.1:7871")
	retries := func() float64 { return h.Metrics(t, "wasmsched_retries_total", "namespace")[ns] }
	cli(t, r, ns, "group", "set", "g", "--max-active", "10")
	submit := func(id, payload string, attempts int, labels map[string]string) {
		t.Helper()
		if _, err := c.Submit(testCtx(t, 5*time.Second), "g", client.SubmitOptions{ID: id, Payload: payload, MaxAttempts: attempts,
			RetryBackoff: 10 * time.Millisecond, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}

	// 1: three failed attempts, FAILED; in the list of failed runs
	submit("r1", "fail:3", 3, nil)
	if run := waitFinal(t, c, 30*time.Second, "r1")["r1"]; run.State != "FAILED" || run.Attempt != 3 {
		t.Fatalf("r1: %s attempt %d, want FAILED after 3", run.State, run.Attempt)
	}
	if out := cli(t, r, ns, "runs", "--group", "g", "--state", "FAILED"); !strings.Contains(out, "r1") {
		t.Fatalf("runs --state FAILED does not list r1:\n%s", out)
	}
	// (its two automatic retries counted once their backoff passed)
	if n := retries(); n != 2 {
		t.Errorf("wasmsched_retries_total %v after r1's 3 attempts, want 2", n)
	}
	// 2: run retry: attempt 4 succeeds, the earlier three still shown
	// (the run is read back after the retry: a quick leader has launched it already)
	if out := cli(t, r, ns, "run", "retry", "r1", "--who", "alice"); !regexp.MustCompile(`^run r1 is (WAITING|LAUNCHED|RUNNING|SUCCEEDED) \(attempt 4 of 4\)`).MatchString(out) {
		t.Fatalf("run retry r1: %q", out)
	}
	run := waitFinal(t, c, 30*time.Second, "r1")["r1"]
	if run.State != "SUCCEEDED" || run.Attempt != 4 || len(run.Attempts) != 4 {
		t.Fatalf("r1 after the retry: %s attempt %d, %d attempts recorded %+v, want SUCCEEDED on attempt 4 with 4", run.State, run.Attempt, len(run.Attempts), run.Attempts)
	}
	for i, a := range run.Attempts[:3] {
		if a.N != i+1 || a.Outcome != "FAILED" {
			t.Errorf("r1's attempt %d: %+v, want FAILED", i+1, a)
		}
	}
	if out := cli(t, r, ns, "run", "show", "r1"); !strings.Contains(out, "4 of 4") {
		t.Errorf("run show r1 does not show the attempts:\n%s", out)
	}

	// 3: group retry by label: exactly tenant a's failed runs
	for _, x := range []struct{ id, tenant string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}} {
		submit(x.id, "fail:1", 1, map[string]string{"tenant": x.tenant})
	}
	for id, run := range waitFinal(t, c, 30*time.Second, "a1", "a2", "b1") {
		if run.State != "FAILED" {
			t.Fatalf("%s: %s, want FAILED", id, run.State)
		}
	}
	if out := cli(t, r, ns, "group", "retry", "g", "--state", "FAILED", "--label", "tenant=a"); !strings.Contains(out, "2 FAILED run(s) retried") {
		t.Fatalf("group retry: %q", out)
	}
	for id, run := range waitFinal(t, c, 30*time.Second, "a1", "a2") {
		if run.State != "SUCCEEDED" || run.Attempt != 2 {
			t.Errorf("%s: %s attempt %d, want SUCCEEDED on attempt 2", id, run.State, run.Attempt)
		}
	}
	// the manual retries count too: r1's and a1's, a2's
	if n := retries(); n != 5 {
		t.Errorf("wasmsched_retries_total %v, want 5 (2 automatic, 3 by hand)", n)
	}
	if run, _ := c.Get(testCtx(t, 5*time.Second), "b1"); run.State != "FAILED" || run.Attempt != 1 {
		t.Errorf("b1 (tenant b): %s attempt %d, want left FAILED", run.State, run.Attempt)
	}

	// 4: a RUNNING run cannot be retried: exit 2, nothing changed
	submit("busy", "sleep", 1, nil)
	waitState(t, c, "busy", "RUNNING")
	_, errs, code := RunCLIErr(t, "--redis", r.URL(), "-n", ns, "run", "retry", "busy")
	if code != 2 || !strings.Contains(errs, "run busy is RUNNING: only a FAILED or STOPPED run can be retried") {
		t.Fatalf("run retry of a RUNNING run: exit %d %q, want 2", code, errs)
	}
	if run, _ := c.Get(testCtx(t, 5*time.Second), "busy"); run.State != "RUNNING" || run.Attempt != 1 {
		t.Fatalf("busy after a refused retry: %s attempt %d", run.State, run.Attempt)
	}
	if _, err := c.Stop(testCtx(t, 5*time.Second), "busy", "done"); err != nil {
		t.Fatal(err)
	}
}

// TestProgress_endToEnd: a handler that reports progress 150 times in
// 1.5 s costs Redis at most a write a second (worker.ProgressEvery: counted
// as the run events the writes publish), and run show and the API show the
// latest it wrote.
func TestProgress_endToEnd(t *testing.T) {
	t.Parallel()
	const ns = "progress"
	r, c, _ := retryEnv(t, ns, "127.0.0.1:7873")
	sub := r.Client(t).Subscribe(testCtx(t, 30*time.Second), keyspace.New(ns).RunEvents())
	defer sub.Close()
	if _, err := sub.Receive(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	running := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range sub.Channel() {
			for _, ev := range strings.Fields(m.Payload) {
				if ev == "RUNNING#g#p1" {
					running++
				}
			}
		}
	}()
	var last client.Progress
	if _, err := c.Submit(testCtx(t, 5*time.Second), "g", client.SubmitOptions{ID: "p1", Payload: "progress"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		run, err := c.Get(testCtx(t, 5*time.Second), "p1")
		if err != nil {
			t.Fatal(err)
		}
		if run.Progress != nil {
			last = *run.Progress
		}
		if run.Final() {
			if run.State != "SUCCEEDED" {
				t.Fatalf("p1: %s %s", run.State, run.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("p1 did not finish in 20 s")
		}
	}
	_ = sub.Close()
	<-done
	// the launch's event, then a write at the first report and one a
	// second after (the rest of 1.5 s is dropped at the end)
	if running < 2 || running > 4 {
		t.Fatalf("%d RUNNING events for p1: want the launch's and 1 to 3 progress writes for 150 reports in 1.5 s", running)
	}
	if last.Fraction == nil || *last.Fraction <= 0 || !strings.HasPrefix(last.Message, "step ") {
		t.Fatalf("the progress seen while p1 ran: %+v", last)
	}
	if out := cli(t, r, ns, "run", "show", "p1"); !strings.Contains(out, "PROGRESS") || !strings.Contains(out, "step ") {
		t.Fatalf("run show p1 has no progress:\n%s", out)
	}
}

// retryEnv starts redis-server, a serve (advertise) and retryWorker for
// ns (stopped at the test's end), and returns a client of ns.
func retryEnv(t *testing.T, ns, advertise string) (*redistest.Server, *client.Client, AdminHost) {
	t.Helper()
	r := redistest.Start(t)
	h := ServeAdmin(t, "host-0", r, ns, advertise)
	t.Cleanup(retryWorker(t, r, ns))
	c, err := client.NewFromRedis(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	return r, c, h
}

// retryWorker runs a library worker for ns whose handler fails a run's
// first N attempts (payload "fail:N"), blocks on "sleep" until stopped, and
// succeeds otherwise; the returned func stops it.
func retryWorker(t *testing.T, r *redistest.Server, ns string) func() {
	t.Helper()
	w, err := worker.New(testCtx(t, 5*time.Second), worker.Config{Client: r.Client(t), Namespace: ns, Advertise: "127.0.0.1:7872",
		Slots: 8, HeartbeatTTL: 2 * time.Second, Logger: procLogger(t, "retry-worker")})
	if err != nil {
		t.Fatal(err)
	}
	w.HandleDefault(worker.HandlerFunc(func(ctx context.Context, run *worker.Run) (string, error) {
		if n, ok := strings.CutPrefix(run.Payload, "fail:"); ok {
			if k, _ := strconv.Atoi(n); run.Attempt <= k {
				return "", fmt.Errorf("attempt %d fails", run.Attempt)
			}
		}
		if run.Payload == "progress" { // 150 reports in 1.5 s
			for i := 1; i <= 150; i++ {
				run.Progress(float64(i)/150, fmt.Sprintf("step %d of 150", i))
				time.Sleep(10 * time.Millisecond)
			}
		}
		if run.Payload == "sleep" {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return fmt.Sprintf("ok on attempt %d", run.Attempt), nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := w.Run(ctx); err != nil {
			t.Errorf("retry worker: %v", err)
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); w.Identity() == "" && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return func() {
		w.StopNow()
		cancel()
		<-exited
	}
}
