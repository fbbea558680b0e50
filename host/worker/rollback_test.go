package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// dumpNamespace is every key of the namespace as DUMP bytes (the state a
// replica would hold), for restoreNamespace to roll back to.
func (e *wenv) dumpNamespace() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	keys, err := e.rdb.Keys(ctx, keyspace.Of(e.st).Prefix()+"*").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		v, err := e.rdb.Dump(ctx, k).Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// restoreNamespace replaces the namespace's keys by a dump: what a
// failover to a replica that missed the writes since the dump does.
func (e *wenv) restoreNamespace(d map[string]string) {
	e.t.Helper()
	ctx := context.Background()
	keys, err := e.rdb.Keys(ctx, keyspace.Of(e.st).Prefix()+"*").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		for k, v := range d {
			p.Restore(ctx, k, 0, v)
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func rollbacks(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	return countersBy(t, reg, "wasmsched_worker_rollbacks_total", "what")
}

// TestWorker_rollback: the store is rolled back to a copy taken while a
// run was RUNNING, after the worker ran it and its SUCCEEDED report was
// acknowledged (a Redis failover to a replica that missed the report). The
// store hands the same assignment token back; the worker does not run it
// again (the journal keeps one line) and reports its outcome again.
func TestWorker_rollback(t *testing.T) {
	e := newWEnv(t)
	journal := filepath.Join(e.dir, "journal")
	reg := prometheus.NewRegistry()
	w := &agent{Slots: 1, Journal: journal, Registerer: reg}
	e.start(w)

	r, tok := e.launch(storage.SubmitRequest{ID: "rb1", Duration: 300 * time.Millisecond, Payload: "result-rb1"})
	e.waitFor("start in the journal", func() bool {
		b, _ := readJournalRaw(journal)
		return strings.Contains(b, "rb1 "+tok)
	})
	before := e.dumpNamespace() // RUNNING on the worker's slot, token tok
	e.waitState(r.ID, storage.StateSucceeded)
	e.restoreNamespace(before)
	if got, _ := e.st.GetRun(context.Background(), r.ID); got.State != storage.StateRunning || got.Assignments[0].Token != tok {
		t.Fatalf("after the rollback the run is %s %+v, want RUNNING with token %s", got.State, got.Assignments, tok)
	}
	// The worker's next full heartbeat sees the token again.
	got := e.waitState(r.ID, storage.StateSucceeded)
	time.Sleep(3 * w.HeartbeatTTL) // more heartbeats: still nothing runs again
	if lines := readJournal(t, journal); len(lines) != 1 || lines[0] != "rb1 "+tok+" 1" {
		t.Fatalf("journal %q: the rolled-back assignment ran again", lines)
	}
	if got.Result == "" && got.Output == "" && got.Reason != "" {
		t.Logf("replayed outcome: %+v", got)
	}
	if n := rollbacks(t, reg); n["replayed"] != 1 || n["refused"] != 0 {
		t.Fatalf("wasmsched_worker_rollbacks_total %v, want replayed 1", n)
	}
	if !strings.Contains(e.logs.String(), "assignment already executed here") {
		t.Fatalf("no log of the replay:\n%s", e.logs.String())
	}
	// The slot is free and the next run runs.
	r2, _ := e.launch(storage.SubmitRequest{ID: "rb2", Duration: 20 * time.Millisecond})
	e.waitState(r2.ID, storage.StateSucceeded)
}

// TestWorker_lostRun: the run disappears from the store while the worker
// runs it (Redis lost the submit); its report is refused "does not exist"
// and the worker keeps it in the namespace's lost list instead of dropping
// it silently.
func TestWorker_lostRun(t *testing.T) {
	e := newWEnv(t)
	reg := prometheus.NewRegistry()
	w := &agent{Slots: 1, Registerer: reg}
	e.start(w)
	r, tok := e.launch(storage.SubmitRequest{ID: "lost1", Duration: 300 * time.Millisecond})
	e.waitFor("run started", func() bool { return len(w.Running()) == 1 })
	if err := e.rdb.Del(context.Background(), keyspace.Of(e.st).Run(r.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	e.waitFor("lost report kept", func() bool {
		l, err := e.st.LostRuns(context.Background(), 10)
		return err == nil && len(l) == 1
	})
	l, _ := e.st.LostRuns(context.Background(), 10)
	if l[0].Run != r.ID || l[0].Token != tok || l[0].Outcome != storage.StateSucceeded || l[0].Worker != w.Identity() || l[0].At == 0 {
		t.Fatalf("lost report %+v, want run %s token %s SUCCEEDED by %s", l[0], r.ID, tok, w.Identity())
	}
	if n := rollbacks(t, reg); n["lost"] != 1 {
		t.Fatalf("wasmsched_worker_rollbacks_total %v, want lost 1", n)
	}
	if _, err := e.st.GetRun(context.Background(), r.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the lost run came back: %v", err)
	}
}

func TestTokenMemory(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := newTokenMemory()
	m.max = 3
	slot := slotKey("w#1", 0)
	m.start("1000-5", slot, now)
	m.finish(&finished{token: "1000-5", outcome: storage.StateSucceeded})
	for _, c := range []struct {
		tok  string
		want bool
	}{
		{"1000-5", true}, {"1000-4", true}, {"999-9", true}, // at or below the high-water token
		{"1000-6", false}, {"1001-1", false}, {"bogus", false},
	} {
		if got, _ := m.predates(c.tok, slot); got != c.want {
			t.Errorf("predates(%s) = %v, want %v", c.tok, got, c.want)
		}
	}
	if got, _ := m.predates("1000-4", slotKey("w#1", 1)); got {
		t.Error("another slot's high-water token applied")
	}
	if e := m.get("1000-5"); e == nil || e.outcome == nil || e.outcome.outcome != storage.StateSucceeded {
		t.Fatalf("memo %+v", e)
	}
	// Bounded: by count (oldest first, busy ones kept) and by age.
	for i, tok := range []string{"1001-1", "1002-1", "1003-1"} {
		m.start(tok, slot, now.Add(time.Duration(i+1)*time.Second))
	}
	m.prune(now, "w#1", func(tok string) bool { return tok == "1000-5" })
	if !m.seen("1000-5") || m.seen("1001-1") || !m.seen("1003-1") || len(m.entries) != 3 {
		t.Fatalf("after a prune by count: %v", m.order)
	}
	m.prune(now.Add(TokenMemory+time.Hour), "w#1", func(string) bool { return false })
	if len(m.entries) != 0 || len(m.order) != 0 {
		t.Fatalf("after a prune by age: %v", m.order)
	}
	if got, _ := m.predates("1003-1", slot); !got {
		t.Fatal("the high-water token must outlive the memory of tokens")
	}
	m.prune(now, "w#2", func(string) bool { return false }) // re-registered: new slots
	if got, _ := m.predates("1003-1", slot); got {
		t.Fatal("the old identity's high-water marks were kept")
	}
}

// TestTokenMemory_batched: the tokens a script makes many of with one INCR
// ("MS-N.K", storage's new_token) are recorded and refused as the plain
// ones are: the high-water mark of a slot orders them by MS, then N, then K.
func TestTokenMemory_batched(t *testing.T) {
	slot := slotKey("w#1", 0)
	for _, c := range []struct {
		name, high, tok string
		want            bool
	}{
		{"same", "1000-7.3", "1000-7.3", true},
		{"earlier-k", "1000-7.3", "1000-7.2", true},
		{"later-k", "1000-7.3", "1000-7.4", false},
		{"earlier-n", "1000-7.3", "1000-6.9", true},
		{"later-n", "1000-7.3", "1000-8.1", false},
		{"earlier-ms", "1000-7.3", "999-50.1", true},
		{"later-ms", "1000-7.3", "1001-1.1", false},
		{"plain-after-batched", "1000-7.3", "1000-8", false},
		{"plain-before-batched", "1000-7.3", "1000-7", true},
		{"batched-after-plain", "1000-7", "1000-7.1", false},
		{"bad-k", "1000-7.3", "1000-7.x", false},
		{"negative", "1000-7.3", "1000-7.-1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newTokenMemory()
			m.start(c.high, slot, time.Now())
			if _, ok := m.high[slot]; !ok {
				t.Fatalf("token %s was not recorded as the slot's high-water mark", c.high)
			}
			if h := m.high[slot].String(); h != c.high {
				t.Fatalf("high-water mark %s, want %s", h, c.high)
			}
			if got, _ := m.predates(c.tok, slot); got != c.want {
				t.Fatalf("predates(%s) after %s = %v, want %v", c.tok, c.high, got, c.want)
			}
		})
	}
}

func readJournalRaw(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestWorker_durableGate: a durable worker starts nothing until a write of
// its own, sent after it read the assignment, was acknowledged by a
// replica. With durable=on and no replica nothing is ever acknowledged:
// the assigned run is not started; once the store stops waiting, it is.
func TestWorker_durableGate(t *testing.T) {
	e := newWEnv(t)
	journal := filepath.Join(e.dir, "journal")
	wst, err := storage.New(e.rdb, "wtest")
	if err != nil {
		t.Fatal(err)
	}
	if err := storagetest.SetDurability(wst, storage.Durability{Mode: storage.DurableOff}); err != nil {
		t.Fatal(err)
	}
	w := &agent{Slots: 1, Journal: journal}
	w.Store = wst
	stop := e.start(w) // registers (durable off: no replica to wait for)
	defer stop()
	if err := storagetest.SetDurability(wst, storage.Durability{Mode: storage.DurableOn, Timeout: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.launch(storage.SubmitRequest{ID: "gate1", Duration: 10 * time.Millisecond})
	time.Sleep(4 * w.HeartbeatTTL) // slot events and full heartbeats go by
	if b, _ := readJournalRaw(journal); b != "" || len(w.Running()) != 0 {
		t.Fatalf("started without a replica's acknowledgement: journal %q, running %v", b, w.Running())
	}
	if !strings.Contains(e.logs.String(), "not replicated") {
		t.Fatalf("no log of the unacknowledged writes:\n%s", e.logs.String())
	}
	if err := storagetest.SetDurability(wst, storage.Durability{Mode: storage.DurableOff}); err != nil {
		t.Fatal(err)
	}
	e.waitState(r.ID, storage.StateSucceeded)
}

// blockReports is a go-redis hook that fails every pipeline carrying a
// report script while on (the worker's reports refused, as at maxmemory).
type blockReports struct {
	retire string
	on     atomic.Bool
}

func (b *blockReports) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *blockReports) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		if b.blocked([]redis.Cmder{c}) {
			return c.Err()
		}
		return next(ctx, c)
	}
}

func (b *blockReports) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if b.blocked(cmds) {
			return cmds[0].Err()
		}
		return next(ctx, cmds)
	}
}

// blocked fails cmds (and says so) when on and they carry a report call.
func (b *blockReports) blocked(cmds []redis.Cmder) bool {
	if !b.on.Load() {
		return false
	}
	for _, c := range cmds {
		if a := c.Args(); len(a) > 5 && (c.Name() == "evalsha" || c.Name() == "eval") && fmt.Sprint(a[5]) == b.retire {
			err := errors.New("test: reports refused")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return true
		}
	}
	return false
}

// TestWorker_reapedKeepsFinishedOutcome: a worker whose run finished while
// its report was refused, and that was reaped meanwhile, reports the
// outcome under the identity the run was assigned to once the store takes
// writes again: the run ends SUCCEEDED, executed once, out of the restore
// set, instead of being restored to run again (the worker dropped every
// pending report when it learned it was reaped).
func TestWorker_reapedKeepsFinishedOutcome(t *testing.T) {
	e := newWEnv(t)
	wc := redis.NewClient(&redis.Options{Addr: e.rdb.(*redis.Client).Options().Addr})
	t.Cleanup(func() { _ = wc.Close() })
	block := &blockReports{retire: keyspace.Of(e.st).Retire()}
	wc.AddHook(block)
	wst, err := storage.New(wc, "wtest")
	if err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(e.dir, "journal")
	w := &agent{Store: wst, Slots: 1, Journal: journal, HeartbeatTTL: 300 * time.Millisecond}
	e.start(w)
	first := w.Identity()
	block.on.Store(true)
	r, _ := e.launch(storage.SubmitRequest{ID: "r1", Duration: 50 * time.Millisecond})
	e.waitFor("the run finished, its report refused", func() bool { return strings.Contains(e.logs.String(), "report failed; will retry") })
	if rp := e.reap(first); len(rp.Affected) != 1 || rp.Affected[0] != r.ID {
		t.Fatalf("reap = %+v, want r1 affected", rp)
	}
	e.waitFor("the worker re-registered", func() bool { return w.Identity() != first && w.Identity() != "" })
	block.on.Store(false)
	got := e.waitState(r.ID, storage.StateSucceeded)
	if q, err := e.st.RestoreQueue(context.Background(), 0); err != nil || len(q) != 0 {
		t.Fatalf("restore queue %v (%v): the report should have taken the run out", q, err)
	}
	if lines := readJournal(t, journal); len(lines) != 1 {
		t.Fatalf("journal %q: want one execution", lines)
	}
	_ = got
}

// TestWorker_storeWiped: the store is wiped (FLUSHALL: a failover to an
// empty replica looks the same) while the worker runs a run; the worker
// finds its registration gone, interrupts the run and keeps it in the
// namespace's lost list (it was dropped silently: "DROPPED assignment
// lost", lost empty), then registers again.
func TestWorker_storeWiped(t *testing.T) {
	e := newWEnv(t)
	reg := prometheus.NewRegistry()
	w := &agent{Slots: 1, Registerer: reg}
	e.start(w)
	first := w.Identity()
	r, tok := e.launch(storage.SubmitRequest{ID: "wiped1", Duration: 10 * time.Second})
	e.waitFor("run started", func() bool { return len(w.Running()) == 1 })
	if err := e.rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the run kept in the lost list", func() bool {
		l, err := e.st.LostRuns(context.Background(), 10)
		return err == nil && len(l) == 1
	})
	l, _ := e.st.LostRuns(context.Background(), 10)
	if l[0].Run != r.ID || l[0].Token != tok || l[0].Worker != first || l[0].Outcome != storage.StateFailed || !strings.Contains(l[0].Reason, "no longer had") {
		t.Fatalf("lost entry %+v, want run %s token %s by %s FAILED", l[0], r.ID, tok, first)
	}
	e.waitFor("the worker registered again", func() bool { return w.Identity() != first && w.Identity() != "" })
	if n := rollbacks(t, reg); n["lost"] != 1 {
		t.Fatalf("wasmsched_worker_rollbacks_total %v, want lost 1", n)
	}
}
