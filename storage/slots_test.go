package storage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// launched: group g with runs of the given slot counts, all LAUNCHED.
func launched(t *testing.T, e *env, slots ...int) storage.Fence {
	t.Helper()
	f := e.lead(t, "L#1#a")
	ok(e.s.SetGroup(ctx, "g", "wait", 100))(t)
	var acts []storage.Action
	for i, k := range slots {
		id := "r" + string(rune('a'+i))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id, Slots: k}))(t)
		acts = append(acts, storage.Action{Kind: storage.ActionLaunch, Run: id})
	}
	v := ok(e.s.GetGroup(ctx, "g"))(t).Version
	ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c", Actions: acts}))(t)
	return f
}

func TestStore_Workers(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		id := "10.0.0.1:80#1700000000#ab"
		if _, err := e.s.Heartbeat(ctx, id, time.Minute, nil); !errors.Is(err, storage.ErrUnknownWorker) {
			t.Fatalf("heartbeat unknown = %v", err)
		}
		mustNil(t, e.s.RegisterWorker(ctx, id, 2, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, id, 3, time.Minute)) // grow
		st := ok(e.s.Heartbeat(ctx, id, time.Minute, nil))(t)
		if len(st) != 3 || st[0].Run != "" {
			t.Fatalf("heartbeat = %+v", st)
		}
		for _, tc := range []struct {
			name  string
			id    string
			slots int
			ttl   time.Duration
		}{
			{"negative-slots", "w2", -1, time.Minute}, {"zero-slots", "w2", 0, time.Minute},
			{"space", "w 2", 1, time.Minute}, {"brace", "w{2", 1, time.Minute}, {"empty", "", 1, time.Minute}, {"ttl", "w2", 1, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if err := e.s.RegisterWorker(ctx, tc.id, tc.slots, tc.ttl); !errors.Is(err, storage.ErrInvalid) {
						t.Fatalf("err = %v", err)
					}
				})
			})
		}
		v := ok(e.s.Slots(ctx))(t)
		if len(v.Workers) != 1 || v.Free != 3 || v.Assigned != 0 || !v.Workers[0].Alive || len(v.Workers[0].Slots) != 3 {
			t.Fatalf("slots view = %+v", v)
		}
	})
}

func TestStore_Allocate(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := launched(t, e, 2, 2, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "wB", 1, time.Minute))
		as := storagetest.AllocateOne(t, ctx, e.s, f, "ra")
		if len(as) != 2 || as[0].Task != 0 || as[1].Task != 1 || as[0].Token == as[1].Token {
			t.Fatalf("assignments = %+v", as)
		}
		r := ok(e.s.GetRun(ctx, "ra"))(t)
		if r.State != storage.StateRunning || len(r.Assignments) != 2 || r.StartedAt.IsZero() || r.Assignments[0] != as[0] {
			t.Fatalf("run = %+v", r)
		}
		for _, tc := range []struct {
			name  string
			fence storage.Fence
			run   string
			want  error
		}{
			{"no-slots", f, "rb", storage.ErrNoSlots},
			{"not-launched", f, "ra", storage.ErrBadState},
			{"unknown", f, "nope", storage.ErrBadState}, // skipped: gone
			{"fenced", storage.Fence{Epoch: f.Epoch + 1, Holder: f.Holder}, "rc", storage.ErrFenced},
			{"bad-name", f, "r}", storage.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if _, err := storagetest.TryAllocateOne(ctx, e.s, tc.fence, tc.run); !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
				})
			})
		}
		// heartbeat sees the assignment and the run state
		st := ok(e.s.Heartbeat(ctx, as[0].Worker, time.Minute, nil))(t)
		if st[as[0].Slot].Run != "ra" || st[as[0].Slot].RunState != storage.StateRunning || st[as[0].Slot].Token != as[0].Token {
			t.Fatalf("heartbeat = %+v", st)
		}
		// report: wrong token / wrong worker / task-1 holder: ErrNotOwner, nothing written
		other := as[1]
		for _, tc := range []struct{ name, w, tok string }{
			{"stale-token", as[0].Worker, "1-1"}, {"wrong-worker", "wX", as[0].Token}, {"task1", other.Worker, other.Token},
		} {
			t.Run("report-"+tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if err := e.s.Report(ctx, tc.w, "ra", tc.tok, storage.StateSucceeded, ""); !errors.Is(err, storage.ErrNotOwner) {
						t.Fatalf("err = %v", err)
					}
				})
			})
		}
		if err := e.s.Report(ctx, as[0].Worker, "ra", as[0].Token, "RUNNING", ""); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("bad outcome = %v", err)
		}
		mustNil(t, e.s.Report(ctx, as[0].Worker, "ra", as[0].Token, storage.StateSucceeded, "ok"))
		mustNil(t, e.s.Report(ctx, as[0].Worker, "ra", as[0].Token, storage.StateSucceeded, "ok")) // replay
		if r := ok(e.s.GetRun(ctx, "ra"))(t); r.State != storage.StateSucceeded || r.FinishedAt.IsZero() {
			t.Fatalf("run = %+v", r)
		}
		if v := ok(e.s.Slots(ctx))(t); v.Free != 3 {
			t.Fatalf("free after report = %d", v.Free)
		}
		storagetest.AllocateOne(t, ctx, e.s, f, "rb")
		mustNil(t, e.s.FailRun(ctx, f, "rb", "lost"))
		mustNil(t, e.s.FailRun(ctx, f, "rb", "lost")) // replay
		if err := e.s.FailRun(ctx, storage.Fence{Epoch: 99, Holder: "x"}, "rc", "x"); !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("fail fenced = %v", err)
		}
		if err := e.s.FailRun(ctx, f, "ra", "x"); !errors.Is(err, storage.ErrBadState) {
			t.Fatalf("fail final = %v", err)
		}
		if v := ok(e.s.Slots(ctx))(t); v.Free != 3 {
			t.Fatalf("free after fail = %d", v.Free)
		}
	})
}

func TestStore_Restore(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := launched(t, e, 3)
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "wDead", 1, 300*time.Millisecond))
		// fill wA first (free zset is lexicographic: wA#0, wA#1, wDead#0)
		as := storagetest.AllocateOne(t, ctx, e.s, f, "ra")
		if len(as) != 3 {
			t.Fatalf("assign = %+v", as)
		}
		deadTask := -1
		for _, a := range as {
			if a.Worker == "wDead" {
				deadTask = a.Task
			}
		}
		time.Sleep(400 * time.Millisecond)
		// new leader takes over
		f2 := e.lead(t, "L#2#b")
		if _, err := e.s.ReapDeadWorkers(ctx, f); !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("reap with old fence = %v", err)
		}
		reaped, affected := func() ([]string, []string) {
			r, err := e.s.ReapDeadWorkers(ctx, f2)
			mustNil(t, err)
			if r.Assigned != 3 {
				t.Errorf("assigned slots before the reap = %d, want 3", r.Assigned)
			}
			return r.Workers, r.Affected
		}()
		if len(reaped) != 1 || reaped[0] != "wDead" || len(affected) != 1 || affected[0] != "ra" {
			t.Fatalf("reap = %v %v", reaped, affected)
		}
		if q := ok(e.s.RestoreQueue(ctx, 0))(t); len(q) != 1 || q[0] != "ra" {
			t.Fatalf("restore queue = %v", q)
		}
		if _, err := e.s.Heartbeat(ctx, "wDead", time.Minute, nil); !errors.Is(err, storage.ErrUnknownWorker) {
			t.Fatalf("heartbeat reaped = %v", err)
		}
		rc := ok(e.s.RestoreCheck(ctx, "ra"))(t)
		var reuse, realloc []int
		for _, s := range rc.Slots {
			if s.Alive && s.Held {
				reuse = append(reuse, s.Task)
			} else {
				realloc = append(realloc, s.Task)
			}
		}
		if len(reuse) != 2 || len(realloc) != 1 || realloc[0] != deadTask {
			t.Fatalf("check = %+v", rc)
		}
		for _, tc := range []struct {
			name           string
			fence          storage.Fence
			reuse, realloc []int
			want           error
		}{
			{"fenced", f, reuse, realloc, storage.ErrFenced},
			{"no-slots", f2, reuse, realloc, storage.ErrNoSlots},
			{"reuse-dead", f2, []int{0, 1, 2}, nil, storage.ErrStale},
			{"not-partition", f2, reuse, nil, storage.ErrInvalid},
			{"repeated", f2, []int{0, 0}, []int{1}, storage.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if _, err := e.s.RestoreApply(ctx, tc.fence, "ra", tc.reuse, tc.realloc); !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
				})
			})
		}
		mustNil(t, e.s.RegisterWorker(ctx, "wC", 1, time.Minute))
		got := ok(e.s.RestoreApply(ctx, f2, "ra", reuse, realloc))(t)
		if len(got) != 3 || got[deadTask].Worker != "wC" || got[reuse[0]] != as[reuse[0]] {
			t.Fatalf("restore = %+v", got)
		}
		if q := ok(e.s.RestoreQueue(ctx, 0))(t); len(q) != 0 {
			t.Fatalf("restore queue after = %v", q)
		}
		if v := ok(e.s.Slots(ctx))(t); v.Free != 0 || v.Assigned != 3 {
			t.Fatalf("slots = %+v", v)
		}
		// a slot changed between check and apply: stale
		e.c.HSet(ctx, keyspace.Of(e.s).Slots(), "wA#0", "")
		if _, err := e.s.RestoreApply(ctx, f2, "ra", []int{0, 1, 2}, nil); !errors.Is(err, storage.ErrStale) {
			t.Fatalf("changed slot = %v", err)
		}
	})
}

// TestStore_Restore_spared: a new leader's term (SpareWorkersSince) gives a
// worker whose heartbeat expired one heartbeat TTL in which the restore
// takes it for alive, as the reaper does: its run's slot verifies and is
// reused with the same token, though a live worker has a free slot. Before
// the term and after the grace it is dead (issue 53: a run's report died
// with the master, its worker's heartbeat expired during the failover,
// and the restore gave the run to another worker: executed twice).
func TestStore_Restore_spared(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		const ttl = time.Second
		f := launched(t, e, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wSlow", 1, ttl))
		as := storagetest.AllocateOne(t, ctx, e.s, f, "ra")
		mustNil(t, e.s.RegisterWorker(ctx, "wLive", 1, time.Minute))
		time.Sleep(ttl + 100*time.Millisecond) // wSlow's heartbeat expired
		alive := func() bool {
			t.Helper()
			rc := ok(e.s.RestoreCheck(ctx, "ra"))(t)
			if len(rc.Slots) != 1 || !rc.Slots[0].Held {
				t.Fatalf("check = %+v", rc)
			}
			return rc.Slots[0].Alive
		}
		if alive() {
			t.Fatal("an expired worker is alive before any term spares it")
		}
		e.unchanged(t, func() {
			if _, err := e.s.RestoreApply(ctx, f, "ra", []int{0}, nil); !errors.Is(err, storage.ErrStale) {
				t.Fatalf("reuse of an expired worker's slot = %v, want ErrStale", err)
			}
		})
		spared := time.Now()
		e.s.SpareWorkersSince(spared)
		// (a machine that stalls past the grace leaves nothing to check)
		late := func() {
			if d := time.Since(spared); d >= ttl-100*time.Millisecond {
				t.Skipf("the machine slept %v past the spare: no window left to check", d)
			}
		}
		if !alive() {
			late()
			t.Fatal("an expired worker is not alive within a heartbeat TTL of the term's start")
		}
		got, err := e.s.RestoreApply(ctx, f, "ra", []int{0}, nil)
		if err != nil || len(got) != 1 || got[0] != as[0] {
			late()
			t.Fatalf("restore = %+v, %v; want the same assignment %+v", got, err, as)
		}
		if r := ok(e.s.ReapDeadWorkers(ctx, f))(t); len(r.Workers) != 0 {
			late()
			t.Fatalf("reaped %v within the grace", r.Workers)
		}
		time.Sleep(time.Until(spared.Add(ttl)) + 100*time.Millisecond)
		if alive() {
			t.Fatal("an expired worker is alive a heartbeat TTL after the term's start")
		}
		if r := ok(e.s.ReapDeadWorkers(ctx, f))(t); len(r.Workers) != 1 || r.Workers[0] != "wSlow" {
			t.Fatalf("reaped %v after the grace, want [wSlow]", r.Workers)
		}
	})
}

// TestStore_ReapDeadWorkers_atMaxmemory: a reap while Redis refuses writes
// at maxmemory (it refuses the workers' heartbeats too) deletes nothing and
// says so (ErrOutOfMemory), and the next reap, memory freed, spares the
// worker for its heartbeat TTL: a worker whose finished runs' reports
// were refused is not reaped, and its runs not run again (a clean-clone
// TestRedisAtMaxmemory ran two runs twice: the leader, idle, had no
// refused write of its own to learn of the stall from). Redis only: the
// embedded server has no maxmemory.
func TestStore_ReapDeadWorkers_atMaxmemory(t *testing.T) {
	e := newEnv(t, "redis", realSrv.URL())
	f := launched(t, e, 1)
	const ttl = 600 * time.Millisecond
	mustNil(t, e.s.RegisterWorker(ctx, "wOOM", 1, ttl))
	storagetest.AllocateOne(t, ctx, e.s, f, "ra")
	time.Sleep(ttl + 100*time.Millisecond) // its heartbeat expired
	prev := ok(e.c.ConfigGet(ctx, "maxmemory").Result())(t)["maxmemory"]
	mustNil(t, e.c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	mustNil(t, e.c.ConfigSet(ctx, "maxmemory", "1").Err())
	e.unchanged(t, func() {
		if _, err := e.s.ReapDeadWorkers(ctx, f); !errors.Is(err, storage.ErrOutOfMemory) {
			t.Fatalf("reap at maxmemory = %v, want ErrOutOfMemory", err)
		} else {
			t.Logf("refused: %v", err)
		}
	})
	refusedAt := time.Now()
	mustNil(t, e.c.ConfigSet(ctx, "maxmemory", prev).Err())
	r, err := e.s.ReapDeadWorkers(ctx, f)
	mustNil(t, err)
	if len(r.Workers) != 0 {
		if d := time.Since(refusedAt); d >= ttl-50*time.Millisecond {
			t.Skipf("the machine slept %v past the refusal: no window left to check", d)
		}
		t.Fatalf("reaped %v right after a refused reap, want it spared", r.Workers)
	}
	time.Sleep(time.Until(refusedAt.Add(ttl)) + 50*time.Millisecond)
	r, err = e.s.ReapDeadWorkers(ctx, f)
	mustNil(t, err)
	if len(r.Workers) != 1 || len(r.Affected) != 1 || r.Affected[0] != "ra" {
		t.Fatalf("reap a TTL after = %+v, want wOOM reaped and ra affected", r)
	}
}

// TestStore_ReapDeadWorkers_afterRefusal: a worker whose heartbeat expired
// while Redis refused writes at maxmemory is spared for its heartbeat TTL
// after the last refusal, then reaped if it stays silent (Redis only: the
// embedded server has no maxmemory).
func TestStore_ReapDeadWorkers_afterRefusal(t *testing.T) {
	e := newEnv(t, "redis", realSrv.URL())
	f := e.lead(t, "L#1#a")
	const ttl = 600 * time.Millisecond
	mustNil(t, e.s.RegisterWorker(ctx, "wOOM", 1, ttl))
	expiry := time.Now().Add(ttl)
	time.Sleep(ttl / 2)
	// Redis refuses a write of ours: maxmemory 1 byte, no eviction.
	prev := ok(e.c.ConfigGet(ctx, "maxmemory").Result())(t)["maxmemory"]
	mustNil(t, e.c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	mustNil(t, e.c.ConfigSet(ctx, "maxmemory", "1").Err())
	_, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "refused"})
	refusedAt := time.Now()
	mustNil(t, e.c.ConfigSet(ctx, "maxmemory", prev).Err())
	if !errors.Is(err, storage.ErrOutOfMemory) {
		t.Fatalf("submit at maxmemory = %v, want ErrOutOfMemory", err)
	}
	time.Sleep(time.Until(expiry) + 50*time.Millisecond) // expired, the refusal less than a TTL ago
	if since := time.Since(refusedAt); since >= ttl-50*time.Millisecond {
		t.Skipf("the machine slept %v past the refusal: no window left to check", since)
	}
	r, err := e.s.ReapDeadWorkers(ctx, f)
	mustNil(t, err)
	if reaped := r.Workers; len(reaped) != 0 {
		t.Fatalf("reaped %v within a TTL of a refusal", reaped)
	}
	time.Sleep(time.Until(refusedAt.Add(ttl)) + 50*time.Millisecond)
	r, err = e.s.ReapDeadWorkers(ctx, f)
	mustNil(t, err)
	if reaped := r.Workers; len(reaped) != 1 || reaped[0] != "wOOM" {
		t.Fatalf("reaped %v a TTL after the refusal, want [wOOM]", reaped)
	}
}
