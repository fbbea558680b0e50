package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// durableStore connects to url (with its durable= query) and opens a
// namespace, recording the commands it sends.
func durableStore(t *testing.T, url, ns string) (*storage.Store, *redistest.Recorder) {
	t.Helper()
	c, err := storage.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rec := redistest.Record(c)
	st, err := storage.New(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	return st, rec
}

// TestStore_Durability: with a replica, an acknowledged submit is on the
// replica when Submit returns; with the replica stopped (SIGSTOP: its link
// silently dead) the submit fails with ErrNotReplicated after the timeout
// instead of being acknowledged; durable=off acknowledges it anyway; a
// master without replicas is not waited for (auto) or refuses (on).
func TestStore_Durability(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	master, replica := redistest.StartReplicated(t)
	rc := replica.Client(t)
	base := "redis://" + master.Addr() + "/0"
	onReplica := func(st *storage.Store, id string) bool {
		n, err := rc.Exists(ctx, keyspace.Of(st).Run(id)).Result()
		return err == nil && n == 1
	}

	t.Run("auto", func(t *testing.T) {
		// bound: how long a connected replica has to acknowledge (at 300ms a
		// healthy replica's first WAIT once timed out on a loaded machine)
		const bound = 1500 * time.Millisecond
		st, rec := durableStore(t, base+"?durable_timeout="+bound.String(), "dur-auto")
		if !st.Durable(ctx) {
			t.Fatal("Durable() = false with a connected replica")
		}
		for i := range 20 {
			id := fmt.Sprintf("r%d", i)
			if _, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}); err != nil {
				t.Fatal(err)
			}
			if !onReplica(st, id) {
				t.Fatalf("run %s acknowledged but not on the replica", id)
			}
		}
		if n := rec.Count("WAIT"); n != 20 {
			t.Fatalf("%d WAIT for 20 submits, want 20", n)
		}
		if n := rec.Count("INFO"); n != 1 {
			t.Fatalf("%d INFO, want 1 (the replica count is read once per %v)", n, storage.DurableRecheck)
		}
		// A worker's plain beat is liveness only (no WAIT); its confirming
		// beat and full heartbeat wait, bounded by a third of its TTL.
		if err := st.RegisterWorker(ctx, "w#1", 1, time.Second); err != nil {
			t.Fatal(err)
		}
		rec.Reset()
		if err := st.Beat(ctx, "w#1", time.Second); err != nil {
			t.Fatal(err)
		}
		if n := rec.Count("WAIT"); n != 0 {
			t.Fatalf("Beat sent %d WAIT", n)
		}
		if err := st.ConfirmBeat(ctx, "w#1", time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Heartbeat(ctx, "w#1", time.Second, nil); err != nil {
			t.Fatal(err)
		}
		if n := rec.Count("WAIT"); n != 2 {
			t.Fatalf("ConfirmBeat + Heartbeat sent %d WAIT, want 2", n)
		}
		replica.Stop()
		err := st.ConfirmBeat(ctx, "w#1", 150*time.Millisecond)
		replica.Cont()
		if !errors.Is(err, storage.ErrNotReplicated) || !strings.Contains(err.Error(), "within 50ms") {
			t.Fatalf("ConfirmBeat with the replica stopped: %v, want ErrNotReplicated within 50ms (ttl/3)", err)
		}
		// Read-only scripts are not waited for.
		rec.Reset()
		if _, err := st.Snapshot(ctx, "g"); err != nil {
			t.Fatal(err)
		}
		if n := rec.Count("WAIT"); n != 0 {
			t.Fatalf("snapshot sent %d WAIT", n)
		}

		replica.Stop()
		start := time.Now()
		_, err = st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "cut"})
		took := time.Since(start)
		replica.Cont()
		if !errors.Is(err, storage.ErrNotReplicated) || !strings.Contains(err.Error(), "no replica acknowledged") {
			t.Fatalf("submit with the replica stopped: %v, want ErrNotReplicated", err)
		}
		if took < bound {
			t.Fatalf("failed after %v, before the %v WAIT bound", took, bound)
		}
		// A pipelined batch (runPipe): every call is reported not done.
		replica.Stop()
		res := st.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "g", ID: "b1"}, {Group: "g", ID: "b2"}})
		replica.Cont()
		for i, r := range res {
			if !errors.Is(r.Err, storage.ErrNotReplicated) {
				t.Fatalf("batch call %d with the replica stopped: %v, want ErrNotReplicated", i, r.Err)
			}
		}
		// The link back: acknowledged again.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "after"})
			if err == nil && onReplica(st, "after") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica back: submit %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("off", func(t *testing.T) {
		st, rec := durableStore(t, base+"?durable=off", "dur-off")
		if st.Durable(ctx) || st.Durability().Mode != storage.DurableOff {
			t.Fatalf("durable=off: Durable() = true, %+v", st.Durability())
		}
		replica.Stop()
		_, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "x"})
		replica.Cont()
		if err != nil {
			t.Fatalf("durable=off with the replica stopped: %v", err)
		}
		if rec.Count("WAIT")+rec.Count("INFO") != 0 {
			t.Fatalf("durable=off sent WAIT or INFO: %v", rec.Commands())
		}
		// Views on the same connection keep the setting: a worker or a
		// client made from st.Redis(), a sibling namespace.
		view, _ := storage.New(st.Redis(), "dur-off-view")
		sib, _ := st.Sibling("dur-off-sib")
		for _, v := range []*storage.Store{view, sib} {
			if v.Durability().Mode != storage.DurableOff {
				t.Fatalf("a store on st.Redis() has %+v, want off", v.Durability())
			}
		}
		// SetDurability changes it, and views made afterwards follow.
		if err := st.SetDurability(storage.Durability{Mode: storage.DurableOn, Timeout: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if v, _ := storage.New(st.Redis(), "dur-off-view"); v.Durability().Mode != storage.DurableOn || v.Durability().Timeout != 50*time.Millisecond {
			t.Fatalf("after SetDurability a view has %+v", v.Durability())
		}
		if err := st.SetDurability(storage.Durability{Mode: "sometimes"}); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("SetDurability(bad mode) = %v", err)
		}
	})

	t.Run("no replica", func(t *testing.T) {
		solo := redistest.Start(t)
		st, rec := durableStore(t, solo.URL(), "dur-solo")
		if _, err := st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "x"}); err != nil {
			t.Fatal(err)
		}
		if rec.Count("WAIT") != 0 {
			t.Fatal("auto without replicas sent WAIT")
		}
		on, _ := durableStore(t, solo.URL()+"?durable=on&durable_timeout=50ms", "dur-solo")
		if _, err := on.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "y"}); !errors.Is(err, storage.ErrNotReplicated) {
			t.Fatalf("durable=on without a replica: %v, want ErrNotReplicated", err)
		}
	})
}

func TestParseRedisURL_durable(t *testing.T) {
	ok := []struct {
		in, rest string
		mode     string
		timeout  time.Duration
	}{
		{"redis://h:1/0?durable=off", "", storage.DurableOff, storage.DefaultDurableTimeout},
		{"redis://h:1/0?dial_timeout=1s&durable=on&durable_timeout=250ms", "", storage.DurableOn, 250 * time.Millisecond},
		{"redis+sentinel://s1:26379/m?durable=auto&db=2", "", storage.DurableAuto, storage.DefaultDurableTimeout},
		{"redis+cluster://h1:7000?durable=off,h2:7001", "", storage.DurableOff, storage.DefaultDurableTimeout},
	}
	for _, c := range ok {
		tg, err := storage.ParseRedisURL(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !tg.DurableSet || tg.Durability.Mode != c.mode || tg.Durability.Timeout != c.timeout {
			t.Errorf("%s: %+v set=%v", c.in, tg.Durability, tg.DurableSet)
		}
	}
	if tg, _ := storage.ParseRedisURL("redis+sentinel://s1:26379/m?durable=auto&db=2"); tg.Failover.DB != 2 {
		t.Errorf("db lost next to durable=: %+v", tg.Failover)
	}
	if tg, _ := storage.ParseRedisURL("redis://h:1/0"); tg.DurableSet || tg.Durability.Mode != storage.DurableAuto {
		t.Errorf("default: %+v", tg.Durability)
	}
	for in, want := range map[string]string{
		"redis://h:1/0?durable=maybe":          `durable="maybe": want auto, on or off`,
		"redis://h:1/0?durable_timeout=soon":   "durable_timeout=\"soon\" is not a duration",
		"redis://h:1/0?durable_timeout=2h":     "want 1ms..1m",
		"redis://h:1/0?durable_timeout=-1s":    "want 1ms..1m",
		"redis+sentinel://s:1/m?durable=never": "want auto, on or off",
	} {
		if _, err := storage.ParseRedisURL(in); !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", in, err, want)
		}
	}
}

// BenchmarkStore_Submit_durable: one submit's round trip against a master
// with one replica (loopback), durable (auto: WAIT 1 in the same pipeline)
// and durable=off; the difference is what a durable acknowledgement costs
// a caller.
func BenchmarkStore_Submit_durable(b *testing.B) {
	master, _ := redistest.StartReplicated(b)
	for _, mode := range []string{"off", "auto"} {
		b.Run(mode, func(b *testing.B) {
			c, err := storage.Connect(context.Background(), "redis://"+master.Addr()+"/0?durable="+mode)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			st, _ := storage.New(c, "bench-"+mode)
			if err := st.Load(context.Background()); err != nil {
				b.Fatal(err)
			}
			round := time.Now().UnixNano() // b.Run calls this more than once
			b.ResetTimer()
			for i := range b.N {
				if _, err := st.Submit(context.Background(), storage.SubmitRequest{Group: fmt.Sprintf("g%d", i%100), ID: fmt.Sprintf("r%d-%d", round, i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
