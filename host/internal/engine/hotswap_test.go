package engine

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wasmsched/wasmsched/host/internal/leader"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

func readFaulty(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../../policies/testdata/faulty/faulty.wasm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *renv) push(name string, blob []byte) storage.PolicyVersion {
	e.t.Helper()
	v, err := e.st.PushPolicy(context.Background(), storage.PushRequest{Name: name, Kind: "serial", Who: "test", Blob: blob, Activate: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *renv) active(name string) int {
	e.t.Helper()
	p, err := e.st.GetPolicy(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Active
}

// TestAutoRollbackAfterKConsecutiveFailures: a pushed version that traps K
// times in a row is rolled back to the previous version (once, even when a
// second host reacts too); the reason is recorded; a success resets the count.
func TestAutoRollbackAfterKConsecutiveFailures(t *testing.T) {
	e := newREnv(t, Config{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond})
	e.rt.set.rollbackAfter, e.rt.set.who = 3, "host test"
	ctx := context.Background()
	wait, _ := plugins.Builtin("wait")
	e.push("flaky", wait)          // v1: good
	e.push("flaky", readFaulty(t)) // v2: panics when max_active is 98
	e.group("boom", "flaky", 98)   // traps on v2
	e.worker("w1", 10, time.Hour)

	// A success resets the count (checked on the ref itself: the
	// coordinator decides groups concurrently, so their order is not fixed).
	ref, err := e.rt.set.Acquire(ctx, "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if ref.Registry != 2 {
		t.Fatalf("acquired registry version %d, want 2", ref.Registry)
	}
	ref.Failed(ctx, OutcomeTrap, nil)
	ref.Failed(ctx, OutcomeTrap, nil)
	ref.Succeeded()
	ref.Failed(ctx, OutcomeTrap, nil)
	ref.Failed(ctx, OutcomeError, nil) // not a policy failure (Redis, unknown policy): ignored
	ref.Failed(ctx, OutcomeTrap, nil)
	if a := e.active("flaky"); a != 2 {
		t.Fatalf("rolled back although a success reset the count: active %d", a)
	}
	if n := ref.fails.Load(); n != 2 {
		t.Fatalf("fail count %d, want 2", n)
	}
	ref.Succeeded()
	ref.Release()

	// Now a trapping group: K failed decisions in a row roll back.
	e.submit("boom", "b-1", 1)
	for i := 0; i < 10 && e.active("flaky") == 2; i++ {
		e.pass()
	}
	if a := e.active("flaky"); a != 1 {
		t.Fatalf("active %d after repeated traps, want 1 (rolled back)", a)
	}
	info, ok, err := storagetest.LastAutoRollback(ctx, e.st, "flaky")
	if err != nil || !ok {
		t.Fatalf("LastAutoRollback: %v %v", ok, err)
	}
	if info.From != 2 || info.To != 1 || !strings.Contains(info.Reason, "consecutive failed decisions of version 2") ||
		!strings.Contains(info.Reason, "trap") {
		t.Fatalf("auto rollback info %+v", info)
	}
	p, _ := e.st.GetPolicy(ctx, "flaky")
	last := p.History[len(p.History)-1]
	if last.Action != "auto-rollback" || last.Who != "host test" || last.Version != 1 {
		t.Fatalf("last history entry %+v", last)
	}
	// The next pass picks v1 up (generation check) and decides the group.
	e.settle()
	if r := e.run("b-1"); r.State == storage.StateWaiting || r.PolicyVersion != builtinVersion(t, "wait") {
		t.Fatalf("b-1 %s by %s, want launched by v1 (wait)", r.State, r.PolicyVersion)
	}
}

// TestAutoRollbackFirstVersionHolds: a first pushed version of a name
// that is not a built-in has nothing to roll back to: after K failures it
// is rolled back to no version, its groups hold (their runs stay WAITING,
// nothing is decided), and the reason says why and what to do.
func TestAutoRollbackFirstVersionHolds(t *testing.T) {
	e := newREnv(t, Config{Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond})
	e.rt.set.rollbackAfter, e.rt.set.who = 3, "host test"
	ctx := context.Background()
	e.push("custom", readFaulty(t)) // v1: panics when max_active is 98
	e.group("held", "custom", 98)
	e.worker("w1", 10, time.Hour)
	e.submit("held", "h-1", 1)
	for i := 0; i < 10 && e.active("custom") == 1; i++ {
		e.pass()
	}
	p, err := e.st.GetPolicy(ctx, "custom")
	if err != nil {
		t.Fatal(err)
	}
	if p.Active != 0 || p.AutoRollback == nil || p.AutoRollback.From != 1 || p.AutoRollback.To != 0 {
		t.Fatalf("after repeated traps: active %d, auto rollback %+v; want version 1 rolled back to none", p.Active, p.AutoRollback)
	}
	for range 3 {
		e.pass()
	}
	if r := e.run("h-1"); r.State != storage.StateWaiting {
		t.Fatalf("h-1 is %s, want WAITING (the group holds)", r.State)
	}
	_, err = e.rt.set.Acquire(ctx, "custom")
	if !errors.Is(err, ErrUnknownPolicy) || !strings.Contains(err.Error(), `policy "custom" is held: its version 1 was rolled back automatically`) ||
		!strings.Contains(err.Error(), "activate a version or push a fixed one") {
		t.Fatalf("Acquire of the held policy: %v", err)
	}
}

// TestAutoRollbackConditional: two hosts hit K failures of the same version:
// only one rollback happens; a built-in name falls back to the built-in.
func TestAutoRollbackConditional(t *testing.T) {
	e := newREnv(t, Config{})
	ctx := context.Background()
	e.push("priority", readFaulty(t)) // v1 of a built-in name: rollback goes to the built-in
	reg := prometheus.NewRegistry()
	rb, err := newRollbackMetrics(reg, "rtest")
	if err != nil {
		t.Fatal(err)
	}
	sets := []*PolicySet{e.rt.set, newPolicySet(e.st, NewShare(sharedWasm(t)), slog.New(slog.DiscardHandler))}
	t.Cleanup(func() { _ = sets[1].Close(ctx) })
	var refs []*PolicyRef
	for i, s := range sets {
		s.rollbackAfter, s.who, s.rb = 2, "host "+string(rune('a'+i)), rb
		ref, err := s.Acquire(ctx, "priority")
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Release()
		refs = append(refs, ref)
	}
	for _, ref := range refs {
		ref.Failed(ctx, OutcomeTimeout, nil)
		ref.Failed(ctx, OutcomeInvalid, nil)
		ref.Failed(ctx, OutcomeInvalid, nil) // after the attempt: no second call
	}
	if a := e.active("priority"); a != 0 {
		t.Fatalf("active %d, want 0 (the built-in)", a)
	}
	got := map[string]float64{}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if got["rolled_back"] != 1 || got["not_active"] != 1 {
		t.Fatalf("auto-rollback outcomes %v, want one rolled_back and one not_active", got)
	}
	p, _ := e.st.GetPolicy(ctx, "priority")
	n := 0
	for _, h := range p.History {
		if h.Action == "auto-rollback" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d auto-rollback history entries, want 1: %+v", n, p.History)
	}
}

// startStandby builds an engine whose host does not lead (its tasks never
// run): only the hot-swap subscriber works, as on a standby host.
func startStandby(t *testing.T, st *storage.Store, logs *syncBuffer) *Engine {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := New(context.Background(), Deps{Store: st, Log: log, Bus: leader.NewBus(st, log), Identity: storage.NewIdentity("127.0.0.1:9")},
		Config{Policies: sharedWasm(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
		_ = rt.Close(context.Background())
	})
	return rt
}

func activeLoaded(rt *Engine, name string) (LoadedPolicy, bool) {
	for _, lp := range rt.Policies().Loaded() {
		if lp.Name == name && lp.Active {
			return lp, true
		}
	}
	return LoadedPolicy{}, false
}

// TestHotSwapSubscriberPreloadsAndSurvivesRedisRestart: a host that does
// not lead pre-loads every newly activated version from the policy channel,
// closes the old one, and keeps doing so after redis-server restarts.
func TestHotSwapSubscriberPreloadsAndSurvivesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	st, err := storage.New(srv.Client(t), "hs")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	logs := &syncBuffer{}
	rt := startStandby(t, st, logs)
	wait, _ := plugins.Builtin("wait")
	discard, _ := plugins.Builtin("discard")
	blobs := [][]byte{wait, discard}
	waitLoaded := func(sha string) {
		t.Helper()
		waitFor(t, 10*time.Second, "version "+sha[:12]+" loaded and active", func() bool {
			lp, ok := activeLoaded(rt, "swapme")
			return ok && lp.SHA256 == sha
		})
		waitFor(t, 5*time.Second, "one version of swapme loaded", func() bool {
			n := 0
			for _, lp := range rt.Policies().Loaded() {
				if lp.Name == "swapme" {
					n++
				}
			}
			return n == 1
		})
	}
	// Wait for the subscription (the first refresh), then push.
	waitFor(t, 5*time.Second, "subscribed", func() bool { return strings.Contains(logs.String(), "subscribed to the policy channel") })
	for i, b := range blobs {
		if _, err := st.PushPolicy(ctx, storage.PushRequest{Name: "swapme", Kind: "serial", Who: "t", Blob: b, Activate: true}); err != nil {
			t.Fatal(err)
		}
		waitLoaded(digest.SHA256(blobs[i]))
	}
	for i := 0; i < 6; i++ {
		if err := st.ActivatePolicy(ctx, "swapme", 1+i%2, "t", ""); err != nil {
			t.Fatal(err)
		}
		waitLoaded(digest.SHA256(blobs[i%2]))
	}
	// redis-server restarts (empty); the subscriber resubscribes and picks
	// up the next pushes.
	srv.Restart(t)
	waitFor(t, 15*time.Second, "resubscribed", func() bool {
		return strings.Count(logs.String(), "subscribed to the policy channel") >= 2
	})
	for _, b := range []([]byte){discard, wait} {
		if _, err := st.PushPolicy(ctx, storage.PushRequest{Name: "swapme", Kind: "serial", Who: "t", Blob: b, Activate: true}); err != nil {
			t.Fatal(err)
		}
		waitLoaded(digest.SHA256(b))
	}
}
