package tests

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestClusterScaleOut: a 3-master Redis Cluster, 12 namespaces spread over
// the three shards, three `serve --namespaces` hosts sharing the leadership
// of all 12, a worker per namespace. Runs are submitted to every namespace;
// the host leading the most namespaces is killed with SIGKILL mid-run: its
// namespaces move to the two others, every run reaches a final state and no
// run is executed twice (worker journals).
func TestClusterScaleOut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	url := cl.URL()

	// Pick 12 namespace names, 4 per shard, and check with CLUSTER KEYSLOT
	// on a real key of each that they land on all three masters.
	owner := map[string]string{} // ns -> master addr
	perShard := map[string]int{}
	var nss []string
	for i := 0; len(nss) < 12 && i < 1000; i++ {
		ns := fmt.Sprintf("ns%02d", i)
		slot, err := cc.ClusterKeySlot(ctx, keyspace.New(ns).Fence()).Result()
		if err != nil {
			t.Fatal(err)
		}
		o := cl.SlotOwner(ctx, t, slot)
		if perShard[o] < 4 {
			perShard[o]++
			owner[ns] = o
			nss = append(nss, ns)
		}
	}
	if len(perShard) != 3 {
		t.Fatalf("namespaces on %d shards, want 3: %v", len(perShard), perShard)
	}
	t.Logf("namespaces per shard: %v", perShard)

	sts := map[string]*storage.Store{}
	journals := map[string]string{}
	for i, ns := range nss {
		sts[ns] = storeOn(t, cc, ns)
		cliURL(t, url, ns, "group", "set", "g", "--policy", "wait", "--max-active", "2")
		_, journals[ns] = workerURL(t, "w-"+ns, url, ns, fmt.Sprintf("127.0.0.1:78%02d", i), 2)
	}

	hosts := map[string]*Proc{}
	for i := range 3 {
		p := serveMulti(t, fmt.Sprintf("host-%d", i), url, nss, fmt.Sprintf("127.0.0.1:77%02d", i), rtLeaseTTL)
		hosts[p.Identity(t)] = p
	}
	// Every namespace gets a leader; balancing spreads them: each host
	// leads ceil(12/3) = 4.
	// The trajectory is logged (each distinct distribution, with the time
	// since the hosts started) so a slow convergence can be read in CI.
	balanceStart, last := time.Now(), ""
	WaitFor(t, 60*time.Second, "12 namespaces led, 4 per host", func() bool {
		by := countBy(leaders(ctx, sts))
		if d := distribution(by, hosts); d != last {
			t.Logf("%6.2fs leaders per host: %s", time.Since(balanceStart).Seconds(), d)
			last = d
		}
		if by[""] > 0 || len(by) != 3 {
			return false
		}
		for id, n := range by {
			if hosts[id] == nil || n != 4 {
				return false
			}
		}
		return true
	})
	// The same through the CLI, per namespace (a balancing handover may be
	// in flight: the namespace must be led by one of our hosts within 10 s).
	by := map[string][]string{}
	for _, ns := range nss {
		id := leaderAmong(t, url, ns, hosts, 10*time.Second)
		by[id] = append(by[id], ns)
	}
	for id, l := range by {
		t.Logf("leader %s: %v", id, l)
	}

	// The namespace's keys live on its shard only.
	for _, ns := range nss[:3] {
		for _, m := range cl.Masters {
			keys, err := m.Client(t).Keys(ctx, "ws:{"+ns+"}:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if (m.Addr() == owner[ns]) != (len(keys) > 0) {
				t.Errorf("namespace %s (slot owner %s): %d keys on %s", ns, owner[ns], len(keys), m.Addr())
			}
		}
	}

	// Submit 6 runs per namespace, 3 before and 3 after the kill.
	submit := func(round int) {
		var wg sync.WaitGroup
		for _, ns := range nss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 3 {
					id := fmt.Sprintf("%s-r%d-%d", ns, round, k)
					if _, err := sts[ns].Submit(ctx, storage.SubmitRequest{Group: "g", ID: id, Duration: time.Duration(200+100*k) * time.Millisecond}); err != nil {
						t.Errorf("submit %s: %v", id, err)
					}
				}
			}()
		}
		wg.Wait()
	}
	submit(0)
	time.Sleep(300 * time.Millisecond)

	// Kill -9 a host leading 4 namespaces, mid-run.
	var victim string
	for id, l := range by {
		if len(l) > len(by[victim]) {
			victim = id
		}
	}
	moved := by[victim]
	hosts[victim].Kill()
	delete(hosts, victim)
	t.Logf("killed %s leading %v", victim, moved)
	submit(1)

	WaitFor(t, 20*time.Second, "every namespace led by a surviving host", func() bool {
		for _, id := range leaders(ctx, sts) {
			if hosts[id] == nil {
				return false
			}
		}
		return true
	})
	for _, ns := range moved {
		leaderAmong(t, url, ns, hosts, 10*time.Second)
	}
	total := 0
	for _, ns := range nss {
		all := WaitAllFinal(t, sts[ns], 45*time.Second)
		if len(all) != 6 {
			t.Errorf("namespace %s: %d runs, want 6", ns, len(all))
		}
		for id, r := range all {
			if r.State != storage.StateSucceeded {
				t.Errorf("run %s: %s (%s)", id, r.State, r.Reason)
			}
		}
		total += len(all)
		checkJournals(t, all, map[string]string{ns: journals[ns]})
	}
	final := countBy(leaders(ctx, sts))
	t.Logf("%d runs SUCCEEDED, each executed once; leaders after the kill: %v", total, final)
}

// TestSentinelFailover: 1 master, 1 replica, 1 sentinel. Two hosts and a
// worker on a namespace through redis+sentinel://; the master is killed
// (SIGKILL) while runs are in flight. Sentinel promotes the replica, the
// engine reconnects to it, a leader is elected with a higher epoch, every
// run reaches a final state, no run executes twice, and a write made with
// the leader's pre-failover fence is rejected (ErrFenced) on the new master.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	se := redistest.StartSentinel(t)
	url := se.URL()
	const ns = "sent"
	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := storeOn(t, rdb, ns)

	cliURL(t, url, ns, "group", "set", "g", "--policy", "wait", "--max-active", "2")
	_, journal := workerURL(t, "w0", url, ns, "127.0.0.1:7950", 2)
	hosts := map[string]*Proc{}
	for i := range 2 {
		p := StartProc(t, fmt.Sprintf("host-%d", i), "--redis", url, "-n", ns, "serve",
			"--advertise", fmt.Sprintf("127.0.0.1:79%02d", i), "--lease-ttl", rtLeaseTTL.String(), "--admin-addr", "")
		hosts[p.Identity(t)] = p
	}
	var before client.Leader
	WaitFor(t, 15*time.Second, "a leader", func() bool {
		before = leaderURL(t, url, ns)
		return hosts[before.Identity] != nil
	})
	for k := range 6 {
		if _, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("a%d", k), Duration: 400 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until something runs, then kill the master.
	WaitFor(t, 10*time.Second, "a RUNNING run", func() bool {
		rs, err := storagetest.ListRuns(ctx, st, storage.RunFilter{Limit: 100})
		if err != nil {
			return false
		}
		for _, r := range rs {
			if r.State == storage.StateRunning {
				return true
			}
		}
		return false
	})
	li, err := st.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldFence := storage.Fence{Epoch: li.Epoch, Holder: li.Identity}
	oldMaster := se.Master.Addr()
	start := time.Now()
	se.Master.Kill()
	var newMaster string
	WaitFor(t, 30*time.Second, "sentinel to promote the replica", func() bool {
		a, err := se.SentinelClient(t).GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
		if err == nil && len(a) == 2 && a[0]+":"+a[1] != oldMaster {
			newMaster = a[0] + ":" + a[1]
			return true
		}
		return false
	})
	t.Logf("master %s killed; sentinel promoted %s after %v", oldMaster, newMaster, time.Since(start).Round(time.Millisecond))
	// Submit more through the same client: it follows the new master.
	for k := range 4 {
		id := fmt.Sprintf("b%d", k)
		var err error
		for range 50 {
			if _, err = st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id, Duration: 200 * time.Millisecond}); err == nil || errors.Is(err, storage.ErrDuplicate) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("submit %s after the failover: %v", id, err)
		}
	}
	var after client.Leader
	WaitFor(t, 20*time.Second, "a leader on the new master with a higher epoch", func() bool {
		after = leaderURL(t, url, ns)
		return hosts[after.Identity] != nil && after.Epoch > oldFence.Epoch
	})
	t.Logf("leader before: %s epoch %d; after: %s epoch %d (took %v)", before.Identity, oldFence.Epoch,
		after.Identity, after.Epoch, time.Since(start).Round(time.Millisecond))
	// The fence: a leader-authority write with the pre-failover fence is
	// rejected by the new master, whoever leads now.
	if err := st.Tick(ctx, oldFence); !errors.Is(err, storage.ErrFenced) {
		t.Errorf("tick with the pre-failover fence %+v: %v, want ErrFenced", oldFence, err)
	}
	if err := storagetest.CheckFence(ctx, st, oldFence); !errors.Is(err, storage.ErrFenced) {
		t.Errorf("check fence %+v: %v, want ErrFenced", oldFence, err)
	}
	all := WaitAllFinal(t, st, 45*time.Second)
	if len(all) != 10 {
		t.Errorf("%d runs, want 10", len(all))
	}
	states := map[string]int{}
	var ids []string
	for id, r := range all {
		states[string(r.State)]++
		ids = append(ids, id)
	}
	sort.Strings(ids)
	checkJournals(t, all, map[string]string{"w0": journal})
	t.Logf("runs %s: %v", strings.Join(ids, ","), states)
}
