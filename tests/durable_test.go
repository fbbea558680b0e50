package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// Issue 29: Redis failover and partitions. Real processes: redis-server
// master, replica and sentinel, two `serve` hosts and two simulating
// workers with journals; the test cuts the replica's link (the master goes
// on serving) 0.5 s before it kills -9 the master. The partition tests put
// a toxiproxy proxy (in process, as a library) on one host's link.

// failoverOutcome is what one failover under load did.
type failoverOutcome struct {
	acked, lost, doubled, lostReports int
	epochs                            []int64 // "became leader" epochs in time order, both hosts
}

// termStarts returns the (time, epoch) of every "became leader" line of
// the hosts, sorted by time.
func termStarts(t *testing.T, hosts ...*Proc) []int64 {
	t.Helper()
	type term struct {
		at    time.Time
		epoch int64
	}
	var ts []term
	for _, h := range hosts {
		for _, l := range h.LogsMatching("became leader") {
			at, err := time.Parse(time.RFC3339Nano, LogAttr(l, "time"))
			e, err2 := strconv.ParseInt(LogAttr(l, "epoch"), 10, 64)
			if err != nil || err2 != nil {
				t.Fatalf("bad 'became leader' line %q", l)
			}
			ts = append(ts, term{at, e})
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].at.Before(ts[j].at) })
	out := make([]int64, len(ts))
	for i, x := range ts {
		out[i] = x.epoch
	}
	return out
}

// failoverCase is one shape of the failover experiment.
type failoverCase struct {
	query string // the Redis URL's query (durability)
	// cut: the replica's link is cut 0.5 s before the kill (else the
	// replica is caught up when the master dies)
	cut bool
	// exec: the workers run a program that takes 200 ms (--exec) with a
	// 2 s heartbeat TTL, so runs are in flight at the kill and their
	// reports die with the master (else --simulate with 30 ms runs and
	// the default TTL)
	exec bool
	// stall: the second worker is a Go library worker in this process
	// (200 ms handler, 2 s heartbeat TTL) whose first report after the
	// kill does not leave until 5 s after the new leader's term started
	// (a report retry that blocks, as a slow dial or WAIT does): longer
	// than its heartbeat TTL and the restore grace (a worker whose
	// heartbeats wait behind it is reaped and its runs run again)
	stall bool
}

// failoverUnderLoad submits paced runs over 10 wait groups (1,000 over 20
// for exec without stall), cuts the
// replica's link (data dropped both ways, nothing closed) 0.5 s before it
// kills -9 the master when fc.cut, keeps submitting through the failover,
// waits until every run the new master has is final and counts what the
// acknowledged submits became.
func failoverUnderLoad(t *testing.T, fc failoverCase) failoverOutcome {
	query := fc.query
	ctx := testCtx(t, 3*time.Minute)
	se := redistest.StartSentinel(t)
	url := se.URL() + query
	const ns = "dur"
	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := storeOn(t, rdb, ns)
	groups, total, cutAt := 10, 600, 250
	if fc.exec && !fc.stall {
		// the experiment of issue 53: 1,000 paced submits over 20 groups
		groups, total, cutAt = 20, 1000, 400
	}
	for g := range groups {
		cliURL(t, url, ns, "group", "set", fmt.Sprintf("g%d", g), "--policy", "wait", "--max-active", "2")
	}
	// The new leader gives workers one heartbeat TTL from its term's
	// start to heartbeat on the new master, and keeps their runs through
	// it (restore and reap alike).
	journals := map[string]string{}
	var stall *reportStall
	if fc.stall {
		stall = startStalledWorker(t, ctx, url, ns, journals)
	}
	for i := range 2 {
		if fc.stall && i == 1 {
			break
		}
		name := fmt.Sprintf("w%d", i)
		journals[name] = filepath.Join(t.TempDir(), name+".journal")
		slots := "4"
		if fc.stall {
			// room for every active run (10 groups of max_active 2): a
			// run the restore takes from the stalled worker finds a
			// free slot here at once
			slots = "16"
		}
		args := []string{"--redis", url, "-n", ns, "worker", "--slots", slots,
			"--advertise", fmt.Sprintf("127.0.0.1:79%d0", 6+i), "--journal", journals[name]}
		if fc.exec {
			args = append(args, "--heartbeat-ttl", "2s", "--exec", "/bin/sh", "--", "-c", "sleep 0.2")
		} else {
			args = append(args, "--simulate")
		}
		StartProc(t, name, args...)
	}
	var hosts []*Proc
	for i := range 2 {
		hosts = append(hosts, StartProc(t, fmt.Sprintf("host-%d", i), "--redis", url, "-n", ns, "serve",
			"--advertise", fmt.Sprintf("127.0.0.1:79%d5", 6+i), "--lease-ttl", rtLeaseTTL.String(), "--admin-addr", ""))
	}
	WaitFor(t, 15*time.Second, "a leader", func() bool { return leaderURL(t, url, ns).Identity != "" })

	// The submitter: one submit every 5 ms, never retried (an error is a
	// submit not acknowledged).
	var (
		mu     sync.Mutex
		acked  []string
		cutNow = make(chan struct{})
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := range total {
			if i == cutAt {
				close(cutNow)
			}
			<-tick.C
			id := fmt.Sprintf("s%d", i)
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := st.Submit(sctx, storage.SubmitRequest{Group: fmt.Sprintf("g%d", i%groups), ID: id, Duration: 30 * time.Millisecond})
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}
	}()
	<-cutNow
	if fc.cut {
		se.CutReplication(t)
		time.Sleep(500 * time.Millisecond)
	}
	oldMaster := se.Master.Addr()
	if stall != nil {
		terms := 0
		for _, h := range hosts {
			terms += len(h.LogsMatching("became leader"))
		}
		stall.arm()
		go func() {
			defer close(stall.release)
			for ctx.Err() == nil {
				n := 0
				for _, h := range hosts {
					n += len(h.LogsMatching("became leader"))
				}
				if n > terms {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(5 * time.Second)
		}()
	}
	se.Master.Kill()
	start := time.Now()
	var newMaster string
	WaitFor(t, 30*time.Second, "sentinel to promote the replica", func() bool {
		a, err := se.SentinelClient(t).GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
		if err == nil && len(a) == 2 && a[0]+":"+a[1] != oldMaster {
			newMaster = a[0] + ":" + a[1]
			return true
		}
		return false
	})
	t.Logf("master killed (replica link cut 0.5 s before: %v); replica promoted after %v", fc.cut, time.Since(start).Round(time.Millisecond))
	// The operator's part: a new replica for the lone new master.
	redistest.StartReplicaOf(t, newMaster)
	<-done
	all := WaitAllFinal(t, st, 90*time.Second)
	if stall != nil && !stall.fired.Load() {
		t.Error("no report of the library worker was in flight after the kill: the stall never happened")
	}

	var out failoverOutcome
	mu.Lock()
	out.acked = len(acked)
	for _, id := range acked {
		if _, ok := all[id]; !ok {
			out.lost++
		}
	}
	mu.Unlock()
	for id, ex := range ExecutionsByRun(ReadJournals(t, journals)) {
		if len(ex) > 1 {
			out.doubled++
			t.Logf("run %s executed %d times: %v", id, len(ex), ex)
		}
	}
	// Let the workers' pending reports settle, then read the lost list.
	time.Sleep(2 * rtHeartbeatTTL)
	lost, err := st.LostRuns(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	out.lostReports = len(lost)
	out.epochs = termStarts(t, hosts...)
	states := map[storage.State]int{}
	for _, r := range all {
		states[r.State]++
	}
	t.Logf("%+v: %d submits acknowledged, %d lost, %d executed twice, %d lost-run reports; runs %v; epochs %v",
		fc, out.acked, out.lost, out.doubled, out.lostReports, states, out.epochs)
	return out
}

// TestDurableFailover: with durable acknowledgements (the default when the
// master has a replica) nothing acknowledged is lost across a failover to
// a replica whose link was cut, nothing runs twice, nothing is stuck, and
// epochs only grow. With durable=off the cut window's acknowledged submits
// are lost (counted: what docs/operations.md "What survives what" says).
//
// The exec cases have runs in flight at the kill: their reports die with
// the master and are retried on the new one, while the worker's heartbeat
// expiry (2 s) passes during the failover. The new leader's restore must
// keep those runs on their worker (the restore grace) and the worker must
// heartbeat while its report retries, or the run executes twice.
func TestDurableFailover(t *testing.T) {
	t.Parallel()
	durable := func(t *testing.T, fc failoverCase) {
		o := failoverUnderLoad(t, fc)
		if o.acked < 100 {
			t.Fatalf("only %d submits acknowledged: the test did not load the engine", o.acked)
		}
		if o.lost != 0 || o.doubled != 0 || o.lostReports != 0 {
			t.Errorf("durable: %d acknowledged submits lost, %d runs executed twice, %d lost-run reports; want 0, 0, 0", o.lost, o.doubled, o.lostReports)
		}
		checkEpochs(t, o.epochs)
	}
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		durable(t, failoverCase{query: "?durable_timeout=250ms", cut: true})
	})
	t.Run("exec-kill", func(t *testing.T) {
		t.Parallel()
		durable(t, failoverCase{exec: true})
	})
	t.Run("exec-cut", func(t *testing.T) {
		t.Parallel()
		durable(t, failoverCase{cut: true, exec: true})
	})
	t.Run("stalled-report", func(t *testing.T) {
		t.Parallel()
		durable(t, failoverCase{query: "?durable_timeout=250ms", exec: true, stall: true})
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		o := failoverUnderLoad(t, failoverCase{query: "?durable=off", cut: true})
		// 0.5 s of acknowledged submits (one per 5 ms) were on the master
		// only: most of them are gone.
		if o.lost < 1 {
			t.Errorf("durable=off lost nothing across a failover after a 0.5 s replica cut (%d acknowledged): the cut did not cut", o.acked)
		}
		if o.lost > 200 {
			t.Errorf("durable=off lost %d acknowledged submits: more than the 0.5 s cut (about 100) can explain", o.lost)
		}
		checkEpochs(t, o.epochs)
	})
}

// checkEpochs fails unless the terms' epochs strictly increase in time
// order (no epoch issued twice, none going back after the failover).
func checkEpochs(t *testing.T, epochs []int64) {
	t.Helper()
	if len(epochs) < 2 {
		t.Fatalf("terms %v: want a term before and after the failover", epochs)
	}
	increasing(t, epochs)
}

// increasing fails unless epochs strictly increase.
func increasing(t *testing.T, epochs []int64) {
	t.Helper()
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Errorf("epochs %v: term %d has epoch %d after %d", epochs, i, epochs[i], epochs[i-1])
		}
	}
}

// leaderPartition: host A reaches Redis through a proxy, host B directly;
// A leads, then fault(proxy) hits A's link alone for hold, then heals. Paced
// submits go on throughout; every run must end SUCCEEDED exactly once, and
// A must say it lost leadership before B says it became leader.
func leaderPartition(t *testing.T, fault func(*redistest.Proxy), hold time.Duration) {
	ctx := testCtx(t, 2*time.Minute)
	srv := redistest.Start(t)
	px := redistest.StartProxy(t, srv.Addr())
	const ns = "part"
	direct := srv.URL()
	viaProxy := "redis://" + px.Addr() + "/0"
	rdb, err := storage.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := storeOn(t, rdb, ns)
	for g := range 5 {
		cliURL(t, direct, ns, "group", "set", fmt.Sprintf("g%d", g), "--policy", "wait", "--max-active", "2")
	}
	_, journal := workerURL(t, "w0", direct, ns, "127.0.0.1:7980", 4)
	a := StartProc(t, "host-a", "--redis", viaProxy, "-n", ns, "serve", "--advertise", "127.0.0.1:7981",
		"--lease-ttl", rtLeaseTTL.String(), "--admin-addr", "")
	WaitFor(t, 15*time.Second, "host-a leads", func() bool { return len(a.LogsMatching("became leader")) > 0 })
	b := StartProc(t, "host-b", "--redis", direct, "-n", ns, "serve", "--advertise", "127.0.0.1:7982",
		"--lease-ttl", rtLeaseTTL.String(), "--admin-addr", "")
	WaitFor(t, 15*time.Second, "host-b stands by", func() bool { return len(b.LogsMatching("standing by")) > 0 })

	var wg sync.WaitGroup
	wg.Add(1)
	submitted := 0
	go func() {
		defer wg.Done()
		end := time.Now().Add(hold + 3*time.Second)
		for i := 0; time.Now().Before(end); i++ {
			if _, err := st.Submit(ctx, storage.SubmitRequest{Group: fmt.Sprintf("g%d", i%5), ID: fmt.Sprintf("p%d", i), Duration: 20 * time.Millisecond}); err != nil {
				t.Errorf("submit p%d: %v", i, err)
				return
			}
			submitted++
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	fault(px)
	WaitFor(t, hold+10*time.Second, "host-b to take over", func() bool { return len(b.LogsMatching("became leader")) > 0 })
	time.Sleep(hold)
	px.Heal(t)
	wg.Wait()
	all := WaitAllFinal(t, st, 60*time.Second)
	if len(all) != submitted {
		t.Errorf("%d runs in the store, %d submitted", len(all), submitted)
	}
	for id, r := range all {
		if r.State != storage.StateSucceeded {
			t.Errorf("run %s %s (%s)", id, r.State, r.Reason)
		}
	}
	checkJournals(t, all, map[string]string{"w0": journal})

	lostAt := logTime(t, a, "lost leadership")
	tookAt := logTime(t, b, "became leader")
	if !lostAt.Before(tookAt) {
		t.Errorf("host-a logged 'lost leadership' at %v, host-b 'became leader' at %v: the cut-off leader must stop first", lostAt, tookAt)
	}
	t.Logf("%d runs SUCCEEDED once; host-a lost leadership %v before host-b took over; host-a: %q",
		len(all), tookAt.Sub(lostAt).Round(time.Millisecond), LogAttr(a.LogsMatching("lost leadership")[0], "reason"))
}

// logTime is the time of p's first log line containing sub.
func logTime(t *testing.T, p *Proc, sub string) time.Time {
	t.Helper()
	ls := p.LogsMatching(sub)
	if len(ls) == 0 {
		t.Fatalf("%s never logged %q", p.Name, sub)
	}
	at, err := time.Parse(time.RFC3339Nano, LogAttr(ls[0], "time"))
	if err != nil {
		t.Fatalf("%s: %q: %v", p.Name, ls[0], err)
	}
	return at
}

// TestLeaderPartition: 2 s of latency on the leader's link (its refreshes
// and writes arrive after its lease) and a silent cut of 3x the lease TTL.
// The cut-off leader stops acting within its lease, the standby takes
// over, nothing is lost or run twice.
func TestLeaderPartition(t *testing.T) {
	t.Parallel()
	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		leaderPartition(t, func(p *redistest.Proxy) { p.Latency(t, 2*time.Second) }, 2*time.Second)
	})
	t.Run("cut", func(t *testing.T) {
		t.Parallel()
		leaderPartition(t, func(p *redistest.Proxy) { p.Cut(t) }, 3*rtLeaseTTL)
	})
}

// TestRedisKill9AOF: redis-server with the append-only file (appendfsync
// everysec) is killed -9 under load and restarted on its port and dir. A
// process kill loses nothing Redis acknowledged (the AOF write precedes the
// reply; only a crash of the machine loses up to the last second): every
// acknowledged submit ends SUCCEEDED, executed once, and the term after the
// restart has a higher epoch.
func TestRedisKill9AOF(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	srv := redistest.StartAOF(t)
	url := srv.URL()
	const ns = "aof"
	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := storeOn(t, rdb, ns)
	for g := range 5 {
		cliURL(t, url, ns, "group", "set", fmt.Sprintf("g%d", g), "--policy", "wait", "--max-active", "2")
	}
	journal := filepath.Join(t.TempDir(), "w0.journal")
	StartProc(t, "w0", "--redis", url, "-n", ns, "worker", "--simulate", "--slots", "4",
		"--advertise", "127.0.0.1:7990", "--journal", journal)
	var hosts []*Proc
	for i := range 2 {
		hosts = append(hosts, StartProc(t, fmt.Sprintf("host-%d", i), "--redis", url, "-n", ns, "serve",
			"--advertise", fmt.Sprintf("127.0.0.1:799%d", i+1), "--lease-ttl", rtLeaseTTL.String(), "--admin-addr", ""))
	}
	WaitFor(t, 15*time.Second, "a leader", func() bool { return leaderURL(t, url, ns).Identity != "" })
	var acked []string
	for i := range 300 {
		if i == 150 {
			srv.Restart(t) // kill -9, then the same port and dir
			t.Log("redis-server killed -9 and restarted from its AOF")
		}
		id := fmt.Sprintf("a%d", i)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := st.Submit(sctx, storage.SubmitRequest{Group: fmt.Sprintf("g%d", i%5), ID: id, Duration: 20 * time.Millisecond})
		cancel()
		if err == nil {
			acked = append(acked, id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	all := WaitAllFinal(t, st, 60*time.Second)
	for _, id := range acked {
		if r, ok := all[id]; !ok || r.State != storage.StateSucceeded {
			t.Errorf("acknowledged run %s: %+v (present %v)", id, r.State, ok)
		}
	}
	checkJournals(t, all, map[string]string{"w0": journal})
	// The AOF kept the lock and the fence: the leader may keep its term
	// across the restart; any later term has a higher epoch.
	epochs := termStarts(t, hosts...)
	increasing(t, epochs)
	t.Logf("%d of 300 submits acknowledged, all SUCCEEDED once; epochs %v", len(acked), epochs)
}

// reportStall is a go-redis hook on the library worker's client: once
// armed, the first pipeline that carries a report script waits until
// release is closed (at most 30 s) before it is sent: the report is in
// flight while the failover happens.
type reportStall struct {
	retire  string // the namespace's retire key: the third key of a report call
	armed   atomic.Bool
	fired   atomic.Bool
	release chan struct{}
}

func (r *reportStall) arm() { r.armed.Store(true) }

func (r *reportStall) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *reportStall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (r *reportStall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if r.armed.Load() && !r.fired.Load() && r.carriesReport(cmds) && r.fired.CompareAndSwap(false, true) {
			select {
			case <-r.release:
			case <-time.After(30 * time.Second):
			}
		}
		return next(ctx, cmds)
	}
}

// carriesReport: an EVALSHA/EVAL whose third key is the retire key (only
// report.lua's calls have it there).
func (r *reportStall) carriesReport(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		a := c.Args()
		if len(a) > 5 && (c.Name() == "evalsha" || c.Name() == "eval") && fmt.Sprint(a[5]) == r.retire {
			return true
		}
	}
	return false
}

// startStalledWorker runs worker "w1" as a Go library worker in the test
// process (every group, a 200 ms handler, a 2 s heartbeat TTL, a journal)
// on a client with a reportStall hook, stopped in t.Cleanup.
func startStalledWorker(t *testing.T, ctx context.Context, url, ns string, journals map[string]string) *reportStall {
	t.Helper()
	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	st := storeOn(t, rdb, ns)
	stall := &reportStall{retire: keyspace.Of(st).Retire(), release: make(chan struct{})}
	rdb.AddHook(stall)
	journals["w1"] = filepath.Join(t.TempDir(), "w1.journal")
	w, err := worker.New(ctx, worker.Config{Client: rdb, Namespace: ns, Advertise: "127.0.0.1:7970", Slots: 4,
		HeartbeatTTL: 2 * time.Second, Journal: journals["w1"], Logger: procLogger(t, "w1")})
	if err != nil {
		t.Fatal(err)
	}
	w.HandleDefault(worker.HandlerFunc(func(ctx context.Context, _ *worker.Run) (string, error) {
		select {
		case <-time.After(200 * time.Millisecond):
			return "ok", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	wctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := w.Run(wctx); err != nil {
			t.Errorf("library worker: %v", err)
		}
	}()
	t.Cleanup(func() {
		w.StopNow()
		cancel()
		<-exited
		_ = rdb.Close()
	})
	return stall
}
