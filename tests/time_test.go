package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// Runs in time end to end: real serve, worker and redis-server processes.

// script writes an executable shell script into the test's temp dir.
func script(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// ExecWorker starts `wasmsched worker --exec PROG` with a journal and
// returns the process and the journal path.
func ExecWorker(t *testing.T, name string, r *redistest.Server, ns, advertise string, slots int, prog string, extra ...string) (*Proc, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), name+".journal")
	args := append([]string{"--redis", r.URL(), "-n", ns, "worker", "--exec", prog,
		"--slots", strconv.Itoa(slots), "--advertise", advertise,
		"--heartbeat-ttl", rtHeartbeatTTL.String(), "--journal", journal}, extra...)
	p := StartProc(t, name, args...)
	p.WaitLog(t, 10*time.Second, "worker registered")
	return p, journal
}

func showRun(t *testing.T, r *redistest.Server, ns, id string) client.Run {
	t.Helper()
	var run client.Run
	if err := json.Unmarshal([]byte(cli(t, r, ns, "run", "show", id, "-o", "json")), &run); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestDelayedRun: a run submitted --in 4s is shown not due (run show,
// run explain), starts no earlier than its not_before by Redis time, and
// the runs submitted meanwhile are not held behind it; --at in the past
// is now; bad time flags exit 2 and write nothing.
func TestDelayedRun(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "delayed"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7701")
	StartWorker(t, "w", r, ns, "127.0.0.1:7711", 2)
	SetGroup(t, r, ns, "g", "wait", 1)

	Submit(t, r, ns, "g", "later", "--in", "4s", "--duration", "0s")
	Submit(t, r, ns, "g", "now", "--duration", "0s")
	Submit(t, r, ns, "g", "past", "--at", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--duration", "0s")
	if run := showRun(t, r, ns, "later"); run.State != "WAITING" || run.NotBefore == nil {
		t.Fatalf("delayed run shows %s, not_before %v", run.State, run.NotBefore)
	}
	out := cli(t, r, ns, "run", "explain", "later")
	// (a loaded machine may take the 4 s to get here: then it is due)
	if time.Until(*showRun(t, r, ns, "later").NotBefore) > 0 && !strings.Contains(out, "not due until") {
		t.Fatalf("explain of a delayed run:\n%s", out)
	}
	for _, id := range []string{"now", "past"} {
		WaitRunState(t, st, id, 10*time.Second, storage.StateSucceeded)
	}
	if run, _ := st.GetRun(testCtx(t, 5*time.Second), "later"); run.State != storage.StateWaiting && time.Until(run.NotBefore) > 100*time.Millisecond {
		t.Fatalf("the delayed run is %s before its time", run.State)
	}
	later := WaitRunState(t, st, "later", 10*time.Second, storage.StateSucceeded)
	if later.StartedAt.Before(later.NotBefore) {
		t.Fatalf("started %v before its not_before %v (Redis time)", later.StartedAt, later.NotBefore)
	}
	t.Logf("not_before %v, started %v (+%v)", later.NotBefore, later.StartedAt, later.StartedAt.Sub(later.NotBefore))

	for _, bad := range [][]string{
		// (--in 0s is now, the default: TestCLI_smallEdges)
		{"--in", "-5s"}, {"--in", "9000h"}, {"--at", "tomorrow"}, {"--in", "1s", "--at", "2030-01-01T00:00:00Z"},
		{"--timeout", "0s"}, {"--timeout", "-1s"}, {"--max-attempts", "0"}, {"--max-attempts", "101"},
		{"--retry-backoff", "1s"}, {"--retry-backoff", "1m", "--max-attempts", "3", "--retry-cap", "1s"},
	} {
		_, stderr, code := RunCLIErr(t, append([]string{"--redis", r.URL(), "-n", ns, "submit", "bad", "--id", "bad"}, bad...)...)
		// the CLI names the flag (a zero where zero means "not given", a
		// flag mix), storage the value ("max attempts 101 outside 1..100")
		flag := strings.TrimPrefix(bad[0], "--")
		if code != 2 || !strings.Contains(stderr, flag) && !strings.Contains(stderr, strings.ReplaceAll(flag, "-", " ")) {
			t.Errorf("submit %v: exit %d, stderr %q: want 2 naming --%s or its value", bad, code, stderr, flag)
		}
	}
	if _, err := st.GetRun(testCtx(t, 5*time.Second), "bad"); err == nil {
		t.Fatal("a refused submit wrote its run")
	}
}

// TestTimeout: an --exec program that ignores SIGTERM is killed at its
// run's timeout (SIGKILL after the stop grace) and the run ends FAILED
// "timed out after 1s"; a group's run timeout applies to its runs.
func TestTimeout(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "timeout"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7702")
	pids := t.TempDir()
	prog := script(t, "stubborn.sh", "trap '' TERM\necho $$ > "+pids+"/$WASMSCHED_RUN_ID\nsleep 30\n")
	ExecWorker(t, "w", r, ns, "127.0.0.1:7712", 2, prog, "--stop-grace", "300ms")
	Submit(t, r, ns, "g", "own", "--timeout", "1s")
	cli(t, r, ns, "group", "set", "slow", "--run-timeout", "700ms")
	Submit(t, r, ns, "slow", "grouped")
	for id, want := range map[string]string{"own": "timed out after 1s", "grouped": "timed out after 700ms"} {
		run := WaitRunState(t, st, id, 15*time.Second, storage.StateFailed)
		if run.Reason != want {
			t.Errorf("run %s: reason %q, want %q", id, run.Reason, want)
		}
		if ran := run.FinishedAt.Sub(run.StartedAt); ran < run.Timeout {
			t.Errorf("run %s ended after %v, before its timeout %v", id, ran, run.Timeout)
		}
		b, err := os.ReadFile(filepath.Join(pids, id))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		WaitFor(t, 5*time.Second, "the timed-out program to be dead", func() bool {
			return syscall.Kill(pid, 0) != nil
		})
	}
	if out := cli(t, r, ns, "run", "show", "own"); !strings.Contains(out, "TIMEOUT") || !strings.Contains(out, "timed out after 1s") {
		t.Fatalf("run show:\n%s", out)
	}
}

// TestRetries: a program that fails twice then succeeds ends SUCCEEDED on
// attempt 3 with both failures recorded (run show lists the attempts);
// each attempt executed once; a run out of attempts ends FAILED; a
// stopped run is not retried.
func TestRetries(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "retries"
	st := Store(t, r, ns)
	RuntimeHost(t, "host", r, ns, "127.0.0.1:7703")
	// Fails while WASMSCHED_ATTEMPT < 3; a run whose payload is "slow" sleeps first.
	prog := script(t, "flaky.sh", `[ "$WASMSCHED_PAYLOAD" = slow ] && sleep 30
echo "attempt $WASMSCHED_ATTEMPT"
[ "$WASMSCHED_ATTEMPT" -ge 3 ] && exit 0
exit 7
`)
	_, journal := ExecWorker(t, "w", r, ns, "127.0.0.1:7713", 2, prog)
	Submit(t, r, ns, "g", "flaky", "--max-attempts", "5", "--retry-backoff", "100ms")
	Submit(t, r, ns, "g2", "short", "--max-attempts", "2", "--retry-backoff", "100ms")
	Submit(t, r, ns, "g3", "stopped", "--max-attempts", "5", "--payload", "slow")

	run := WaitRunState(t, st, "flaky", 20*time.Second, storage.StateSucceeded)
	if run.Attempt != 3 || len(run.Attempts) != 3 {
		t.Fatalf("flaky: attempt %d, attempts %+v: want SUCCEEDED on attempt 3 with 3 recorded", run.Attempt, run.Attempts)
	}
	for i, a := range run.Attempts {
		want := storage.StateFailed
		if i == 2 {
			want = storage.StateSucceeded
		}
		if a.N != i+1 || a.Outcome != want || (want == storage.StateFailed && a.Reason != "exit status 7") {
			t.Errorf("attempt %d = %+v, want %s", i+1, a, want)
		}
	}
	if short := WaitRunState(t, st, "short", 20*time.Second, storage.StateFailed); short.Attempt != 2 || len(short.Attempts) != 2 {
		t.Fatalf("short: attempt %d, attempts %d: want FAILED after 2", short.Attempt, len(short.Attempts))
	}
	WaitRunState(t, st, "stopped", 10*time.Second, storage.StateRunning)
	cli(t, r, ns, "run", "stop", "stopped", "--reason", "enough")
	if s := WaitRunState(t, st, "stopped", 15*time.Second, storage.StateStopped); s.Attempt != 1 {
		t.Fatalf("stopped run on attempt %d", s.Attempt)
	}
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"w": journal}))
	for id, n := range map[string]int{"flaky": 3, "short": 2, "stopped": 1} {
		var atts []int
		for _, e := range ex[id] {
			atts = append(atts, e.Attempt)
		}
		if len(atts) != n || !slices.IsSorted(atts) || len(slices.Compact(slices.Clone(atts))) != n {
			t.Errorf("run %s executions by attempt %v: want attempts 1..%d once each", id, atts, n)
		}
	}
	out := cli(t, r, ns, "run", "show", "flaky")
	if !strings.Contains(out, "ATTEMPT") || strings.Count(out, "exit status 7") != 2 {
		t.Fatalf("run show lists no attempts:\n%s", out)
	}
}

// TestRetriesAcrossKill9: runs with retries go on while the leader and
// then a worker are killed with -9 mid-attempt: every run ends SUCCEEDED,
// and no attempt of any run is executed twice (the worker journals each
// execution start with its attempt).
func TestRetriesAcrossKill9(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "retrykill"
	st := Store(t, r, ns)
	hosts := &hostSet{procs: map[string]*Proc{}}
	for i := range 2 {
		hosts.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", i), r, ns, fmt.Sprintf("127.0.0.1:77%02d", 20+i)))
	}
	// Attempt 1 fails after 400ms; later attempts succeed after 1s.
	prog := script(t, "job.sh", `if [ "$WASMSCHED_ATTEMPT" -lt 2 ]; then sleep 0.4; exit 3; fi
sleep 1
`)
	journals := map[string]string{}
	workers := map[string]*Proc{}
	for i := range 2 {
		name := fmt.Sprintf("w%d", i)
		workers[name], journals[name] = ExecWorker(t, name, r, ns, fmt.Sprintf("127.0.0.1:77%02d", 30+i), 3, prog)
	}
	var ids []string
	for i := range 6 {
		ids = append(ids, Submit(t, r, ns, fmt.Sprintf("g%d", i), fmt.Sprintf("run-%d", i), "--max-attempts", "4", "--retry-backoff", "200ms"))
	}
	WaitFor(t, 15*time.Second, "first attempts started", func() bool { return len(ReadJournals(t, journals)) >= 6 })
	l := Leader(t, r, ns)
	t.Logf("kill -9 leader %s", l.Identity)
	hosts.procs[l.Identity].Kill()
	// A second attempt running on some worker: kill that worker.
	var victim string
	WaitFor(t, 20*time.Second, "a second attempt running", func() bool {
		for _, e := range ReadJournals(t, journals) {
			if e.Attempt == 2 {
				victim = e.Worker
				return true
			}
		}
		return false
	})
	t.Logf("kill -9 worker %s", victim)
	workers[victim].Kill()
	all := WaitAllFinal(t, st, 60*time.Second)
	ex := ExecutionsByRun(ReadJournals(t, journals))
	for _, id := range ids {
		run := all[id]
		if run.State != storage.StateSucceeded {
			t.Errorf("run %s ended %s (%s), attempts %+v", id, run.State, run.Reason, run.Attempts)
		}
		seen := map[int]bool{}
		for _, e := range ex[id] {
			if seen[e.Attempt] {
				t.Errorf("run %s: attempt %d executed twice: %+v", id, e.Attempt, ex[id])
			}
			seen[e.Attempt] = true
		}
		if !seen[run.Attempt] || len(run.Attempts) != run.Attempt {
			t.Errorf("run %s: attempt %d, %d recorded, executions %+v", id, run.Attempt, len(run.Attempts), ex[id])
		}
		t.Logf("run %s: attempt %d of %d, executions %v", id, run.Attempt, run.MaxAttempts, ex[id])
	}
}

// TestScheduleAcrossLeaderKill9: an @every 1s schedule goes on across a
// kill -9 of its leader: one run per tick submitted, none twice (each
// executed once), the ticks whole seconds, and the ticks missed while no
// leader ran counted once by the missed-tick rule (at most one gap).
func TestScheduleAcrossLeaderKill9(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ns = "sched"
	st := Store(t, r, ns)
	hosts := &hostSet{procs: map[string]*Proc{}}
	for i := range 2 {
		hosts.add(t, RuntimeHost(t, fmt.Sprintf("host-%d", i), r, ns, fmt.Sprintf("127.0.0.1:77%02d", 40+i)))
	}
	_, journal := StartWorker(t, "w", r, ns, "127.0.0.1:7750", 4)
	SetGroup(t, r, ns, "g", "wait", 4)
	cli(t, r, ns, "schedule", "set", "tick", "--group", "g", "--cron", "@every 1s")
	if _, stderr, code := RunCLIErr(t, "--redis", r.URL(), "-n", ns, "schedule", "set", "bad", "--group", "g", "--cron", "*/5 * *"); code != 2 || !strings.Contains(stderr, "cron") {
		t.Fatalf("bad cron: exit %d %q", code, stderr)
	}
	WaitFor(t, 10*time.Second, "3 ticks submitted", func() bool { return scheduled(t, st, "tick") >= 3 })
	l := Leader(t, r, ns)
	t.Logf("kill -9 leader %s", l.Identity)
	hosts.procs[l.Identity].Kill()
	n := scheduled(t, st, "tick")
	WaitFor(t, 20*time.Second, "3 more ticks after the failover", func() bool { return scheduled(t, st, "tick") >= n+3 })
	cli(t, r, ns, "schedule", "pause", "tick")
	time.Sleep(1500 * time.Millisecond) // a tick due meanwhile is not submitted
	final := WaitAllFinal(t, st, 20*time.Second)

	var sc client.Schedule
	if err := json.Unmarshal([]byte(cli(t, r, ns, "schedule", "show", "tick", "-o", "json")), &sc); err != nil {
		t.Fatal(err)
	}
	var ticks []int64
	for id, run := range final {
		if run.Schedule != "tick" {
			continue
		}
		ms, err := strconv.ParseInt(strings.TrimPrefix(id, "s-tick-"), 10, 64)
		if err != nil || ms%1000 != 0 {
			t.Fatalf("run %s: not a whole-second tick id", id)
		}
		ticks = append(ticks, ms)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i] < ticks[j] })
	gaps, skipped := 0, int64(0)
	for i := 1; i < len(ticks); i++ {
		if d := (ticks[i] - ticks[i-1]) / 1000; d > 1 {
			gaps++
			skipped += d - 1
		}
	}
	if int64(len(ticks)) != sc.Submitted || skipped != sc.Missed || gaps > 1 {
		t.Fatalf("ticks %v: %d submitted, %d skipped in %d gaps; schedule says submitted %d, missed %d", ticks, len(ticks), skipped, gaps, sc.Submitted, sc.Missed)
	}
	ex := ExecutionsByRun(ReadJournals(t, map[string]string{"w": journal}))
	for _, ms := range ticks {
		if id := fmt.Sprintf("s-tick-%d", ms); len(ex[id]) != 1 {
			t.Errorf("tick run %s executed %d times", id, len(ex[id]))
		}
	}
	t.Logf("%d ticks submitted, %d missed over the failover", len(ticks), sc.Missed)
}

// scheduled counts the runs schedule name submitted.
func scheduled(t *testing.T, st *storage.Store, name string) int {
	t.Helper()
	rs, err := storagetest.ListRuns(testCtx(t, 5*time.Second), st, storage.RunFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rs {
		if r.Schedule == name {
			n++
		}
	}
	return n
}
