package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wenv is a redis-server, a store and a fence for playing the leader.
type wenv struct {
	t     *testing.T
	rdb   redis.UniversalClient // the test's own client, for fault injection
	st    *storage.Store
	fence storage.Fence
	logs  *syncBuf
	dir   string
}

func newWEnv(t *testing.T) *wenv {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	st, err := storage.New(rdb, "wtest")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stamp := storage.NewIdentity("leader:1")
	if err := rdb.Set(ctx, keyspace.Of(st).Lock(), stamp, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	epoch, err := st.BecomeLeader(ctx, stamp)
	if err != nil {
		t.Fatal(err)
	}
	return &wenv{t: t, rdb: rdb, st: st, fence: storage.Fence{Epoch: epoch, Holder: stamp}, logs: &syncBuf{}, dir: t.TempDir()}
}

// start runs a worker until the test ends; cancel stops it early.
func (e *wenv) start(w *agent) (cancel func()) {
	e.t.Helper()
	if w.Store == nil {
		w.Store = e.st
	}
	if w.Advertise == "" {
		w.Advertise = "127.0.0.1:7070"
	}
	if w.HeartbeatTTL == 0 {
		w.HeartbeatTTL = 300 * time.Millisecond
	}
	if w.DrainTimeout == 0 {
		w.DrainTimeout = 200 * time.Millisecond
	}
	w.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	ctx, cancelFn := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancelFn()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("worker.Run: %v", err)
				}
			case <-time.After(15 * time.Second):
				e.t.Errorf("worker did not stop")
			}
		})
	}
	e.t.Cleanup(stop)
	e.waitFor("worker registered", func() bool { return w.Identity() != "" })
	return stop
}

// launch submits a run and, as the leader, launches it: the apply places
// it on the worker's free slots. It returns the task-0 token.
func (e *wenv) launch(req storage.SubmitRequest) (storage.Run, string) {
	e.t.Helper()
	ctx := context.Background()
	if req.Group == "" {
		req.Group = "g"
	}
	r, err := e.st.Submit(ctx, req)
	if err != nil {
		e.t.Fatal(err)
	}
	sn, err := e.st.Snapshot(ctx, req.Group)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, e.fence, req.Group, storage.Decision{
		Version: sn.Group.Version, ClaimID: "c-" + r.ID, Policy: "wait", PolicyVersion: "test",
		Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: r.ID}},
	}); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.st.GetRun(ctx, r.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	as := got.Assignments
	if got.State != storage.StateRunning || len(as) == 0 || as[0].Task != 0 {
		e.t.Fatalf("allocate %s: %+v", r.ID, as)
	}
	return r, as[0].Token
}

func (e *wenv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; logs:\n%s", what, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitState waits until run id is in state want and returns it.
func (e *wenv) waitState(id string, want storage.State) storage.Run {
	e.t.Helper()
	var r storage.Run
	e.waitFor(fmt.Sprintf("run %s %s", id, want), func() bool {
		var err error
		r, err = e.st.GetRun(context.Background(), id)
		return err == nil && r.State == want
	})
	return r
}

func readJournal(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestWorkerSimulateOnceAndFail(t *testing.T) {
	e := newWEnv(t)
	journal := filepath.Join(e.dir, "journal")
	reg := prometheus.NewRegistry()
	w := &agent{Slots: 2, Journal: journal, Registerer: reg}
	e.start(w)

	ok, tok := e.launch(storage.SubmitRequest{ID: "ok1", Duration: 150 * time.Millisecond})
	bad, badTok := e.launch(storage.SubmitRequest{ID: "bad1", Payload: SimulateFailPayload, Duration: 50 * time.Millisecond})
	e.waitState(ok.ID, storage.StateSucceeded)
	r := e.waitState(bad.ID, storage.StateFailed)
	if !strings.Contains(r.Reason, "simulated failure") {
		t.Errorf("failed run reason %q", r.Reason)
	}
	// Let a few more heartbeats pass: nothing runs twice.
	time.Sleep(400 * time.Millisecond)
	lines := readJournal(t, journal)
	want := map[string]bool{"ok1 " + tok + " 1": true, "bad1 " + badTok + " 1": true}
	if len(lines) != 2 || !want[lines[0]] || !want[lines[1]] || lines[0] == lines[1] {
		t.Errorf("journal %q, want one line each of %v", lines, want)
	}
	// Slots are free again.
	v, err := e.st.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v.Free != 2 || v.Assigned != 0 {
		t.Errorf("slots after the runs: free %d assigned %d", v.Free, v.Assigned)
	}
	if got := runsByOutcome(t, reg); got["SUCCEEDED"] != 1 || got["FAILED"] != 1 {
		t.Errorf("wasmsched_worker_runs_total: %v", got)
	}
}

func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorkerExecEnvOutputAndFailure(t *testing.T) {
	e := newWEnv(t)
	prog := writeScript(t, e.dir, "job.sh", `echo "id=$WASMSCHED_RUN_ID group=$WASMSCHED_GROUP payload=$WASMSCHED_PAYLOAD ns=$WASMSCHED_NAMESPACE"
echo "to stderr" >&2
if [ "$WASMSCHED_PAYLOAD" = "boom" ]; then exit 3; fi
`)
	e.start(&agent{Slots: 1, Exec: prog})

	r, _ := e.launch(storage.SubmitRequest{ID: "x1", Group: "etl", Payload: "hello"})
	got := e.waitState(r.ID, storage.StateSucceeded)
	logs := e.logs.String()
	for _, want := range []string{
		`line="id=x1 group=etl payload=hello ns=wtest"`,
		`stream=stdout+stderr line="to stderr"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	// the run's output keeps the order the program wrote it in, across
	// stdout and stderr (two pipes had stderr first at times)
	if want := "id=x1 group=etl payload=hello ns=wtest\nto stderr\n"; got.Output != want {
		t.Errorf("output %q, want %q", got.Output, want)
	}

	r, _ = e.launch(storage.SubmitRequest{ID: "x2", Group: "etl", Payload: "boom"})
	got = e.waitState(r.ID, storage.StateFailed)
	if got.Reason != "exit status 3" {
		t.Errorf("reason %q, want exit status 3", got.Reason)
	}
}

func TestWorkerStopKillsProcessGroup(t *testing.T) {
	e := newWEnv(t)
	pidFile := filepath.Join(e.dir, "child.pid")
	// The script and its child ignore SIGTERM, so the SIGKILL after the
	// grace period is what ends them.
	prog := writeScript(t, e.dir, "long.sh", `trap '' TERM
sleep 300 &
echo $! > `+pidFile+`
echo started
wait
`)
	e.start(&agent{Slots: 1, Exec: prog, StopGrace: 300 * time.Millisecond})
	r, _ := e.launch(storage.SubmitRequest{ID: "long1"})
	e.waitFor("child pid", func() bool { b, err := os.ReadFile(pidFile); return err == nil && len(bytes.TrimSpace(b)) > 0 })
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RequestStop(context.Background(), r.ID, "operator said so"); err != nil {
		t.Fatal(err)
	}
	got := e.waitState(r.ID, storage.StateStopped)
	if got.Reason != "operator said so" {
		t.Errorf("stopped reason %q", got.Reason)
	}
	e.waitFor("child process killed", func() bool { return processGone(pid) })
	if !strings.Contains(e.logs.String(), "SIGKILL") {
		t.Errorf("no SIGKILL logged:\n%s", e.logs.String())
	}
}

// processGone reports whether pid no longer runs (absent or a zombie).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestWorkerReapedReRegistersAndDropsWork(t *testing.T) {
	e := newWEnv(t)
	journal := filepath.Join(e.dir, "journal")
	w := &agent{Slots: 1, Journal: journal, HeartbeatTTL: 300 * time.Millisecond}
	e.start(w)
	r, _ := e.launch(storage.SubmitRequest{ID: "slow", Duration: time.Hour})
	e.waitFor("run executing", func() bool { return len(w.Running()) == 1 })
	old := w.Identity()

	// Play the reaper: the worker's heartbeat expired (forced), the leader
	// reaps it, so its slots are gone and its run awaits restore.
	ctx := context.Background()
	rp := e.reap(old)
	reaped, affected := rp.Workers, rp.Affected
	if len(reaped) != 1 || reaped[0] != old || len(affected) != 1 || affected[0] != r.ID {
		t.Fatalf("reap: %v %v", reaped, affected)
	}
	e.waitFor("re-registered under a new identity", func() bool { id := w.Identity(); return id != "" && id != old })
	e.waitFor("execution dropped", func() bool { return len(w.Running()) == 0 })
	if got, _ := e.st.GetRun(ctx, r.ID); got.State != storage.StateRunning {
		t.Errorf("the dropped run was reported: %s", got.State)
	}
	v, err := e.st.Slots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Workers) != 1 || v.Workers[0].Identity != w.Identity() || !v.Workers[0].Alive || v.Free != 1 {
		t.Errorf("slots after re-register: %+v", v)
	}
	if lines := readJournal(t, journal); len(lines) != 1 {
		t.Errorf("journal %q", lines)
	}
}

// reap plays the reaper: worker id's heartbeat expired (forced) and the
// leader reaps it (its slots gone, its runs awaiting restore).
func (e *wenv) reap(id string) storage.Reaped {
	e.t.Helper()
	ctx := context.Background()
	if err := e.rdb.ZAdd(ctx, keyspace.Of(e.st).Workers(), redis.Z{Score: 1, Member: id}).Err(); err != nil {
		e.t.Fatal(err)
	}
	rp, err := e.st.ReapDeadWorkers(ctx, e.fence)
	if err != nil {
		e.t.Fatal(err)
	}
	return rp
}

// numsub is how many clients subscribe to channel.
func (e *wenv) numsub(channel string) int64 {
	e.t.Helper()
	m, err := e.rdb.PubSubNumSub(context.Background(), channel).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return m[channel]
}

// TestWorker_slotEventsOwnChannel: a worker listens on its own slot-events
// channel (keyspace.Keys.SlotEvents of its identity) and starts a run
// announced there at once: its heartbeat (TTL 3 min: one a minute, the
// first at start) could not have picked the run up in the wait. A
// re-registration (reaped: a new identity) moves the subscription to the
// new identity's channel.
func TestWorker_slotEventsOwnChannel(t *testing.T) {
	// listening starts a worker and waits until it listens on its own
	// channel; a heartbeat TTL of 3 min leaves the first beat (at start)
	// the only one in a test's waits
	listening := func(t *testing.T, ttl time.Duration) (*wenv, *agent, string) {
		e := newWEnv(t)
		w := &agent{Slots: 1, HeartbeatTTL: ttl}
		e.start(w)
		id := w.Identity()
		e.waitFor("subscribed to its own channel", func() bool { return e.numsub(keyspace.Of(e.st).SlotEvents(id)) == 1 })
		return e, w, id
	}
	executing := func(e *wenv, w *agent, run string) {
		e.waitFor("run "+run+" executing", func() bool { r := w.Running(); return len(r) == 1 && r[0] == run })
	}
	t.Run("starts-announced-run", func(t *testing.T) {
		e, w, _ := listening(t, 3*time.Minute)
		r, _ := e.launch(storage.SubmitRequest{ID: "r1", Duration: time.Hour})
		executing(e, w, r.ID)
	})
	t.Run("older-hosts-shared-channel", func(t *testing.T) {
		// a host from before the per-worker channels announces on the
		// shared one: the worker takes the entries naming it
		e, w, id := listening(t, 3*time.Minute)
		if n := e.numsub(keyspace.Of(e.st).SharedSlotEvents()); n != 1 {
			t.Fatalf("%d subscribers of the shared channel, want 1", n)
		}
		// the launch announces on the worker's own channel: off it first
		// (as an older worker), so only the shared message can start the run
		w.relisten <- "elsewhere"
		e.waitFor("off its own channel", func() bool { return e.numsub(keyspace.Of(e.st).SlotEvents(id)) == 0 })
		r, _ := e.launch(storage.SubmitRequest{ID: "r1", Duration: time.Hour})
		if len(w.Running()) != 0 {
			t.Fatalf("started before the shared message: %v", w.Running())
		}
		if err := e.rdb.Publish(context.Background(), keyspace.Of(e.st).SharedSlotEvents(), "other#0#x "+id+"#0#"+r.ID).Err(); err != nil {
			t.Fatal(err)
		}
		executing(e, w, r.ID)
	})
	t.Run("follows-new-identity", func(t *testing.T) {
		e, w, old := listening(t, 300*time.Millisecond)
		e.reap(old)
		e.waitFor("re-registered under a new identity", func() bool { id := w.Identity(); return id != "" && id != old })
		id := w.Identity()
		e.waitFor("subscription moved to the new identity's channel", func() bool {
			return e.numsub(keyspace.Of(e.st).SlotEvents(id)) == 1 && e.numsub(keyspace.Of(e.st).SlotEvents(old)) == 0
		})
	})
}

func TestWorkerStaleTokenReportRefused(t *testing.T) {
	e := newWEnv(t)
	w := &agent{Slots: 1}
	e.start(w)
	r, tok := e.launch(storage.SubmitRequest{ID: "r1", Duration: time.Hour})
	e.waitFor("run executing", func() bool { return len(w.Running()) == 1 })
	ctx := context.Background()
	err := e.st.Report(ctx, w.Identity(), r.ID, tok+"x", storage.StateSucceeded, "")
	if !errors.Is(err, storage.ErrNotOwner) {
		t.Errorf("report with a stale token: %v, want ErrNotOwner", err)
	}
	err = e.st.Report(ctx, "other:1#1#ab", r.ID, tok, storage.StateSucceeded, "")
	if !errors.Is(err, storage.ErrNotOwner) {
		t.Errorf("report by another worker: %v, want ErrNotOwner", err)
	}
	if got, _ := e.st.GetRun(ctx, r.ID); got.State != storage.StateRunning {
		t.Errorf("refused reports changed the run: %s", got.State)
	}
}

func TestWorkerShutdownReportsFailed(t *testing.T) {
	e := newWEnv(t)
	w := &agent{Slots: 1}
	stop := e.start(w)
	r, _ := e.launch(storage.SubmitRequest{ID: "r1", Duration: time.Hour})
	e.waitFor("run executing", func() bool { return len(w.Running()) == 1 })
	stop()
	got := e.waitState(r.ID, storage.StateFailed)
	if got.Reason != InterruptedReason {
		t.Errorf("reason %q", got.Reason)
	}
}

// TestWorkerDrain: a cancelled worker takes no new runs (its slots leave
// the free pool), lets the run in flight finish within the drain timeout
// (SUCCEEDED, not interrupted), then deregisters.
func TestWorkerDrain(t *testing.T) {
	e := newWEnv(t)
	w := &agent{Slots: 2, DrainTimeout: 10 * time.Second}
	stop := e.start(w)
	r, _ := e.launch(storage.SubmitRequest{ID: "r1", Duration: 700 * time.Millisecond})
	e.waitFor("run executing", func() bool { return len(w.Running()) == 1 })
	id := w.Identity()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	e.waitFor("the worker's free slot out of the pool", func() bool {
		n, _ := e.rdb.ZCard(context.Background(), keyspace.Of(e.st).Free()).Result()
		return n == 0
	})
	// the leader cannot place a new run on a draining worker
	late, _ := e.st.Submit(context.Background(), storage.SubmitRequest{Group: "g", ID: "late"})
	sn, err := e.st.Snapshot(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	res := e.st.ApplyBatch(context.Background(), e.fence, []storage.GroupDecision{{Group: "g", Decision: storage.Decision{
		Version: sn.Group.Version, ClaimID: "late", Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: late.ID}}}}})
	if res[0].Err != nil || res[0].Queued != 1 {
		t.Fatalf("a launch while the only worker drains: %+v, want it queued (no free slot)", res[0])
	}
	<-stopped
	if got := e.waitState(r.ID, storage.StateSucceeded); got.State != storage.StateSucceeded {
		t.Fatalf("the run in flight: %s", got.State)
	}
	v, err := e.st.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, wk := range v.Workers {
		if wk.Identity == id {
			t.Fatalf("the drained worker is still registered: %+v", wk)
		}
	}
	if n := e.rdb.SCard(context.Background(), keyspace.Of(e.st).Draining()).Val(); n != 0 {
		t.Fatalf("%d draining marks left", n)
	}
}

func TestWorkerValidate(t *testing.T) {
	st, _ := storage.New(redistest.Start(t).Client(t), "v")
	for _, tc := range []struct {
		w    *agent
		want string
	}{
		{&agent{Advertise: "a:1"}, "Store is required"},
		{&agent{Store: st}, "Advertise address is required"},
		{&agent{Store: st, Advertise: "a#1"}, "must not contain"},
		{&agent{Store: st, Advertise: "a:1", Slots: -1}, "slots must be >= 1"},
		{&agent{Store: st, Advertise: "a:1", HeartbeatTTL: time.Millisecond}, "below the minimum"},
	} {
		err := tc.w.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.want, err, tc.want)
		}
	}
	// zero means default: Validate accepts it and changes nothing; Run fills it
	w := &agent{Store: st, Advertise: "a:1"}
	if err := w.Validate(); err != nil || w.Slots != 0 || w.HeartbeatTTL != 0 || w.StopGrace != 0 || w.Logger != nil {
		t.Errorf("Validate: %v, and it changed the agent: slots %d ttl %v grace %v", err, w.Slots, w.HeartbeatTTL, w.StopGrace)
	}
	w.withDefaults()
	if w.Slots != 1 || w.HeartbeatTTL != DefaultHeartbeatTTL || w.StopGrace != DefaultStopGrace || w.Logger == nil {
		t.Errorf("defaults: slots %d ttl %v grace %v", w.Slots, w.HeartbeatTTL, w.StopGrace)
	}
}

// runsByOutcome gathers wasmsched_worker_runs_total by outcome.
func runsByOutcome(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	return countersBy(t, reg, "wasmsched_worker_runs_total", "outcome")
}

// countersBy reads counter name from reg by the value of label.
func countersBy(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestWorkerLostContactFailsItsRuns: a worker cut off from Redis for longer
// than its heartbeat TTL stops the runs it executes (the leader may have
// reaped it and placed them elsewhere) while Redis still holds the run
// RUNNING, and, once the link heals, reports it FAILED with
// LostContactReason.
func TestWorkerLostContactFailsItsRuns(t *testing.T) {
	e := newWEnv(t)
	p := redistest.StartProxy(t, e.rdb.(*redis.Client).Options().Addr)
	cut := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = cut.Close() })
	st, err := storage.New(cut, "wtest")
	if err != nil {
		t.Fatal(err)
	}
	w := &agent{Store: st, Slots: 1, HeartbeatTTL: 300 * time.Millisecond}
	e.start(w)
	r, _ := e.launch(storage.SubmitRequest{ID: "r1", Duration: time.Hour})
	e.waitFor("run executing", func() bool { return len(w.Running()) == 1 })

	p.Cut(t)
	e.waitFor("the execution given up", func() bool { return len(w.Running()) == 0 })
	if got, _ := e.st.GetRun(context.Background(), r.ID); got.State != storage.StateRunning {
		t.Fatalf("run %s while the worker is cut off, want RUNNING (its report cannot land)", got.State)
	}
	p.Heal(t)
	got := e.waitState(r.ID, storage.StateFailed)
	if got.Reason != LostContactReason {
		t.Errorf("reason %q, want %q", got.Reason, LostContactReason)
	}
	if !strings.Contains(e.logs.String(), "worker heartbeat failed") {
		t.Errorf("no heartbeat failure logged:\n%s", e.logs.String())
	}
}

// TestWorkerExecOutputOrder: a program that alternates stdout and stderr
// lines gets its output kept in the order it wrote them, every time.
func TestWorkerExecOutputOrder(t *testing.T) {
	e := newWEnv(t)
	prog := writeScript(t, e.dir, "mix.sh", `for i in 1 2 3 4 5 6 7 8; do echo "out $i"; echo "err $i" >&2; done
`)
	e.start(&agent{Slots: 2, Exec: prog})
	var want strings.Builder
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&want, "out %d\nerr %d\n", i, i)
	}
	for i := range 10 {
		r, _ := e.launch(storage.SubmitRequest{ID: fmt.Sprintf("m%d", i), Group: fmt.Sprintf("g%d", i)})
		if got := e.waitState(r.ID, storage.StateSucceeded); got.Output != want.String() {
			t.Fatalf("run %d: output %q, want %q", i, got.Output, want.String())
		}
	}
}
