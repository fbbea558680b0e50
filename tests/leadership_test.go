package tests

import (
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// waitLeader waits until `wasmsched leader` names one of ids with an epoch
// above minEpoch and returns it.
func waitLeader(t *testing.T, r *redistest.Server, ns string, d time.Duration, minEpoch int64, ids ...string) client.Leader {
	t.Helper()
	var got client.Leader
	WaitFor(t, d, "leader among "+strings.Join(ids, ", "), func() bool {
		got = Leader(t, r, ns)
		if got.Epoch <= minEpoch {
			return false
		}
		for _, id := range ids {
			if got.Identity == id {
				return true
			}
		}
		return false
	})
	return got
}

// TestTwoHostsOneLeaderKill9: exactly one of two hosts leads; after kill -9
// of the leader the other leads once the lease ran out, with a higher epoch.
func TestTwoHostsOneLeaderKill9(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ttl = time.Second
	a := Serve(t, "a", r, "ns", "127.0.0.1:7001", ttl)
	b := Serve(t, "b", r, "ns", "127.0.0.1:7002", ttl)
	ida, idb := a.Identity(t), b.Identity(t)
	l1 := waitLeader(t, r, "ns", 15*time.Second, 0, ida, idb)
	if l1.Since == nil || l1.Namespace != "ns" {
		t.Fatalf("leader json %+v: want namespace and since", l1)
	}
	leader, standby, sid := a, b, idb
	if l1.Identity == idb {
		leader, standby, sid = b, a, ida
	}
	// Give the standby a few retries; it must stay standby.
	standby.WaitLog(t, 5*time.Second, "standing by", "leader="+l1.Identity)
	time.Sleep(ttl)
	if n := len(leader.LogsMatching("became leader")); n != 1 {
		t.Fatalf("leader logged 'became leader' %d times", n)
	}
	if n := len(standby.LogsMatching("became leader")); n != 0 {
		t.Fatalf("standby logged 'became leader' %d times", n)
	}
	if got := Leader(t, r, "ns"); got.Identity != l1.Identity || got.Epoch != l1.Epoch {
		t.Fatalf("leader changed without a failure: %+v -> %+v", l1, got)
	}
	if !strings.Contains(leader.WaitLog(t, time.Second, "became leader"), "identity="+l1.Identity) {
		t.Fatal("leader log lacks its identity")
	}

	leader.Kill()
	killed := time.Now()
	l2 := waitLeader(t, r, "ns", 3*ttl, l1.Epoch, sid)
	took := time.Since(killed)
	line := standby.WaitLog(t, time.Second, "became leader")
	if LogAttr(line, "epoch") == "" || l2.Epoch <= l1.Epoch {
		t.Fatalf("new epoch %d not above %d (%s)", l2.Epoch, l1.Epoch, line)
	}
	t.Logf("takeover after kill -9 observed by the CLI after %v (ttl %v), epoch %d -> %d", took, ttl, l1.Epoch, l2.Epoch)
}

// TestRestartSameAddress: a host killed and restarted at once at the same
// --advertise address is a new identity and stays standby while its
// predecessor's lease lives; then it leads with a higher epoch.
func TestRestartSameAddress(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	rdb := r.Client(t)
	ctx := testCtx(t, 30*time.Second)
	const ttl = 1500 * time.Millisecond
	const addr = "127.0.0.1:7101"
	a := Serve(t, "a", r, "ns", addr, ttl)
	ida := a.Identity(t)
	l1 := waitLeader(t, r, "ns", 15*time.Second, 0, ida)
	lockKey := keyspace.Of(Store(t, r, "ns")).Lock()

	a.Kill()
	pttl, err := rdb.PTTL(ctx, lockKey).Result()
	if err != nil || pttl <= 0 {
		t.Fatalf("lock pttl after kill: %v %v", pttl, err)
	}
	expires := time.Now().Add(pttl)
	a2 := Serve(t, "a2", r, "ns", addr, ttl)
	ida2 := a2.Identity(t)
	if ida2 == ida || !strings.HasPrefix(ida2, addr+"#") || !strings.HasPrefix(ida, addr+"#") {
		t.Fatalf("identities %q and %q: want distinct, both at %s", ida, ida2, addr)
	}
	// While the old lease lives the new process stands by.
	a2.WaitLog(t, 5*time.Second, "standing by", "leader="+ida)
	for time.Until(expires) > 100*time.Millisecond {
		if got := Leader(t, r, "ns"); got.Identity != ida {
			if time.Until(expires) > 50*time.Millisecond {
				t.Fatalf("leader became %q %v before the old lease expired", got.Identity, time.Until(expires))
			}
		}
		if len(a2.LogsMatching("became leader")) != 0 && time.Until(expires) > 50*time.Millisecond {
			t.Fatalf("restarted host led %v before its predecessor's lease expired", time.Until(expires))
		}
		time.Sleep(50 * time.Millisecond)
	}
	l2 := waitLeader(t, r, "ns", 3*ttl, l1.Epoch, ida2)
	line := a2.WaitLog(t, time.Second, "became leader")
	t.Logf("restarted host leads %v after the old lease expired: %s", time.Since(expires), line)
	if l2.Epoch <= l1.Epoch {
		t.Fatalf("epoch %d not above %d", l2.Epoch, l1.Epoch)
	}
}

// TestPausedLeaderIsFenced: SIGSTOP the leader for longer than the TTL; the
// standby takes over; after SIGCONT the old leader's writes are rejected by
// the fence, it demotes itself, and none of its writes reach Redis.
func TestPausedLeaderIsFenced(t *testing.T) {
	for _, unchecked := range []bool{true, false} {
		name := "checked"
		if unchecked {
			// The old leader skips its local lease check and always
			// writes once more with its stale fence: only the storage
			// fence stands between it and Redis.
			name = "unchecked"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testPausedLeader(t, unchecked)
		})
	}
}

func testPausedLeader(t *testing.T, unchecked bool) {
	r := redistest.Start(t)
	ctx := testCtx(t, 30*time.Second)
	st := Store(t, r, "ns")
	const ttl = 600 * time.Millisecond
	serve := Serve
	if unchecked { // a host of the test's own that writes with its stale fence
		serve = func(t testing.TB, name string, r *redistest.Server, ns, advertise string, ttl time.Duration, _ ...string) *Proc {
			return startBinary(t, staleTickerPath, name, "--redis", r.URL(), "-n", ns, "--advertise", advertise, "--lease-ttl", ttl.String())
		}
	}
	a := serve(t, "a", r, "ns", "127.0.0.1:7201", ttl)
	ida := a.Identity(t)
	l1 := waitLeader(t, r, "ns", 15*time.Second, 0, ida)
	b := serve(t, "b", r, "ns", "127.0.0.1:7202", ttl)
	idb := b.Identity(t)
	b.WaitLog(t, 15*time.Second, "standing by")
	WaitFor(t, 10*time.Second, "a tick by a", func() bool {
		tk, _ := st.LastTick(ctx)
		return tk.Holder == ida && tk.Count >= 1
	})
	if unchecked {
		// its stale ticks start once it has seen its own term (every
		// TTL/3): paused before that, it would have no fence to write with
		a.WaitLog(t, 10*time.Second, "stale ticker armed", "epoch="+itoa(l1.Epoch))
	}

	a.Stop()
	l2 := waitLeader(t, r, "ns", 4*ttl, l1.Epoch, idb)
	WaitFor(t, 10*time.Second, "a tick by b", func() bool {
		tk, _ := st.LastTick(ctx)
		return tk.Holder == idb && tk.Epoch == l2.Epoch
	})
	time.Sleep(ttl / 2) // paused for well over the TTL in total

	// Watch the tick hash from now on: only b, only b's epoch, count never drops.
	var (
		mu      sync.Mutex
		bad     []string
		samples int
		stop    = make(chan struct{})
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		var last int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			tk, err := st.LastTick(ctx)
			mu.Lock()
			samples++
			switch {
			case err != nil:
				bad = append(bad, err.Error())
			case tk.Holder != idb || tk.Epoch != l2.Epoch || tk.Count < last:
				bad = append(bad, "tick "+tk.Holder+" epoch "+itoa(tk.Epoch)+" count "+itoa(tk.Count)+" after count "+itoa(last))
			}
			last = tk.Count
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	a.Cont()
	a.WaitLog(t, 3*time.Second, "lost leadership", "epoch="+itoa(l1.Epoch))
	if unchecked {
		line := a.WaitLog(t, 3*time.Second, "tick rejected: fenced")
		if LogAttr(line, "epoch") != itoa(l1.Epoch) {
			t.Fatalf("fenced tick line %q: want epoch %d", line, l1.Epoch)
		}
	}
	a.WaitLog(t, 3*time.Second, "standing by", "leader="+idb)
	time.Sleep(ttl) // keep watching a while after the old leader woke up
	close(stop)
	<-stopped

	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("old leader's writes visible in Redis (%d of %d samples): %v", len(bad), samples, bad[:min(5, len(bad))])
	}
	if got := Leader(t, r, "ns"); got.Identity != idb || got.Epoch != l2.Epoch {
		t.Fatalf("leader after SIGCONT %+v, want b at epoch %d", got, l2.Epoch)
	}
	if n := len(a.LogsMatching("became leader")); n != 1 {
		t.Fatalf("old leader became leader %d times", n)
	}
	reason := LogAttr(a.WaitLog(t, time.Second, "lost leadership"), "reason")
	t.Logf("old leader demoted: %s (%d samples, all b's)", reason, samples)
}

// TestSIGTERMHandsOver: SIGTERM on the leader releases the lock: the
// standby leads well before the TTL would have expired.
func TestSIGTERMHandsOver(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	const ttl = 5 * time.Second
	a := Serve(t, "a", r, "ns", "127.0.0.1:7301", ttl)
	ida := a.Identity(t)
	l1 := waitLeader(t, r, "ns", 15*time.Second, 0, ida)
	b := Serve(t, "b", r, "ns", "127.0.0.1:7302", ttl)
	idb := b.Identity(t)
	b.WaitLog(t, 15*time.Second, "standing by")

	a.Signal(syscall.SIGTERM)
	start := time.Now()
	l2 := waitLeader(t, r, "ns", ttl/2, l1.Epoch, idb)
	took := time.Since(start)
	if code := a.Wait(t, 5*time.Second); code != 0 {
		t.Fatalf("leader exit code %d after SIGTERM", code)
	}
	a.WaitLog(t, time.Second, "renouncing leadership", "reason=shutdown")
	a.WaitLog(t, time.Second, "leader lock released")
	if took >= ttl/2 {
		t.Fatalf("takeover took %v, want well under the TTL %v", took, ttl)
	}
	t.Logf("takeover after SIGTERM observed by the CLI after %v (ttl %v), epoch %d", took, ttl, l2.Epoch)
}

// TestLeaderCLI: no leader -> identity "" and no since; -o table; bad
// flags and an unknown namespace exit 2.
func TestLeaderCLI(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	if _, errs, code := RunCLIErr(t, "--redis", r.URL(), "leader", "-n", "nosuch"); code != 2 || !strings.Contains(errs, "namespace nosuch does not exist") {
		t.Fatalf("leader of an unknown namespace: exit %d %q", code, errs)
	}
	if out, code := RunCLI(t, "--redis", r.URL(), "-n", "empty", "group", "set", "g"); code != 0 {
		t.Fatalf("group set: exit %d %q", code, out)
	}
	got := Leader(t, r, "empty")
	if got.Identity != "" || got.Since != nil || got.Epoch != 0 || got.Namespace != "empty" || got.LastTick != nil {
		t.Fatalf("no leader: %+v", got)
	}
	out, code := RunCLI(t, "--redis", r.URL(), "leader", "-n", "empty")
	if code != 0 || !strings.Contains(out, "(none)") || !strings.Contains(out, "IDENTITY") {
		t.Fatalf("table: exit %d %q", code, out)
	}
	for _, args := range [][]string{
		{"serve", "--lease-ttl", "10ms"},
		{"serve", "--lease-ttl", "-1s"},
		{"serve", "--advertise", "a#b"},
		{"leader", "extra"},
		{"leader", "-o", "yaml"},
	} {
		if _, code := RunCLI(t, append([]string{"--redis", r.URL()}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
