package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestRedisAtMaxmemory: a real redis-server reaches its maxmemory with
// noeviction while a host and a worker run. Submits fail with an error
// that names the cause (exit 1, nothing written); the runs accepted before
// are not lost; once the memory is freed the engine goes on by itself (no
// restart): every accepted run and a new one end SUCCEEDED, each executed
// once, but for a run the worker gave up because its heartbeat was refused
// for longer than its TTL (FAILED, worker.LostContactReason).
func TestRedisAtMaxmemory(t *testing.T) {
	r := redistest.Start(t)
	ctx := testCtx(t, 2*time.Minute)
	st := Store(t, r, "oom")
	rdb := r.Client(t)
	host := RuntimeHost(t, "host", r, "oom", "127.0.0.1:7931")
	host.WaitLog(t, 10*time.Second, "became leader")
	wk, journal := StartWorker(t, "worker", r, "oom", "127.0.0.1:7941", 2)
	if _, err := st.SetGroup(ctx, "g", "wait", 2); err != nil {
		t.Fatal(err)
	}
	var accepted []string
	for i := range 12 {
		run, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("a%02d", i), Duration: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		accepted = append(accepted, run.ID)
	}
	WaitRunState(t, st, "a00", 20*time.Second, storage.StateRunning, storage.StateSucceeded)

	// Fill Redis: maxmemory a little above what it uses, then a ballast
	// key grown until Redis refuses it.
	used := usedMemory(t, rdb)
	mustDo(t, rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	mustDo(t, rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+4<<20, 10)).Err())
	t.Cleanup(func() { _ = rdb.ConfigSet(ctx, "maxmemory", "0").Err() })
	chunk := strings.Repeat("x", 256<<10)
	for i := 0; ; i++ {
		err := rdb.Append(ctx, "ballast", chunk).Err()
		if err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("ballast: %v", err)
			}
			break
		}
		if i > 1000 {
			t.Fatal("redis never refused the ballast")
		}
	}

	// A submit now fails, says why, and writes nothing.
	before, err := rdb.DBSize(ctx).Result()
	mustDo(t, err)
	_, errs, code := RunCLIErr(t, "--redis", r.URL(), "-n", "oom", "submit", "g", "--id", "refused")
	if code != 1 || !strings.Contains(errs, "maxmemory") || !strings.Contains(errs, "nothing was written") {
		t.Fatalf("submit at maxmemory: exit %d, stderr %q (want exit 1 naming maxmemory)", code, errs)
	}
	if _, err := st.GetRun(ctx, "refused"); err == nil {
		t.Fatal("the refused run exists")
	}
	if after, _ := rdb.DBSize(ctx).Result(); after != before {
		t.Fatalf("keys %d -> %d across a refused submit", before, after)
	}
	// The engine keeps running through a stall longer than a heartbeat TTL.
	time.Sleep(2 * rtHeartbeatTTL)
	if host.Exited() || wk.Exited() {
		t.Fatalf("a process exited at maxmemory (host %v, worker %v)", host.Exited(), wk.Exited())
	}

	// ... and meets the refusals itself (its writes name the cause too).
	if n := len(host.LogsMatching("maxmemory")) + len(wk.LogsMatching("maxmemory")); n == 0 {
		t.Fatalf("neither process logged a refused write during the stall:\nhost %v\nworker %v", host.Logs(), wk.Logs())
	}
	t.Logf("refusals logged: host %d, worker %d; e.g. %v", len(host.LogsMatching("maxmemory")), len(wk.LogsMatching("maxmemory")),
		append(host.LogsMatching("maxmemory"), wk.LogsMatching("maxmemory")...)[0])

	// Free the memory: the engine goes on by itself.
	mustDo(t, rdb.Del(ctx, "ballast").Err())
	freed := time.Now()
	run, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "after", Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("submit after freeing memory: %v", err)
	}
	accepted = append(accepted, run.ID)
	execs := map[string]int{}
	final := map[string]storage.Run{}
	for _, id := range accepted {
		final[id] = WaitRunState(t, st, id, 60*time.Second, storage.StateSucceeded, storage.StateFailed)
	}
	for _, e := range ReadJournals(t, map[string]string{"worker": journal}) {
		execs[e.Run]++
	}
	// Every accepted run ends SUCCEEDED, executed once; except that a run
	// the worker was executing when its heartbeat had been refused for
	// longer than its TTL is given up by the worker (it may have been
	// reaped: worker.LostContactReason) and ends FAILED, executed at most
	// once. Which runs were in flight then depends on timing; a run
	// started after the memory was freed (as "after" is) must succeed.
	lost := 0
	for _, id := range accepted {
		r := final[id]
		switch {
		case r.State == storage.StateSucceeded && execs[id] == 1:
		case r.State == storage.StateFailed && r.Reason == worker.LostContactReason && execs[id] <= 1 &&
			!r.StartedAt.IsZero() && r.StartedAt.Before(freed):
			lost++
		default:
			t.Errorf("run %s: %s (reason %q, started %v, memory freed %v), executed %d times; want SUCCEEDED once, "+
				"or FAILED for lost contact while the memory was full", id, r.State, r.Reason, r.StartedAt, freed, execs[id])
		}
	}
	t.Logf("%d of %d runs given up by the worker for lost contact during the stall", lost, len(accepted))
}

func usedMemory(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(testCtx(t, 5*time.Second), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
