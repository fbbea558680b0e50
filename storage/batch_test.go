package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestStore_AllocateBatch: FIFO in the given order, all-or-nothing per run,
// stop at the first misfit (later runs untouched), skip runs that are no
// longer LAUNCHED, fenced, replay-safe, and the slot-events announcement.
func TestStore_AllocateBatch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		// 3 slots; ra needs 2, rb 1, rc 4 (does not fit), rd 1 (would fit: must not overtake rc)
		f := launched(t, e, 2, 1, 4, 1, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wA#1", 2, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "wB", 1, time.Minute))
		// re stopped before the batch: skipped, not an error
		ok(e.s.RequestStop(ctx, "re", "x"))(t)

		t.Run("fenced", func(t *testing.T) {
			e.unchanged(t, func() {
				if _, err := e.s.AllocateBatch(ctx, storage.Fence{Epoch: f.Epoch + 1, Holder: f.Holder}, []string{"ra"}); !errors.Is(err, storage.ErrFenced) {
					t.Fatalf("err = %v", err)
				}
			})
		})
		t.Run("invalid", func(t *testing.T) {
			e.unchanged(t, func() {
				if _, err := e.s.AllocateBatch(ctx, f, []string{"ra", "ra"}); !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("twice = %v", err)
				}
				if _, err := e.s.AllocateBatch(ctx, f, []string{"r}"}); !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("bad name = %v", err)
				}
			})
		})
		t.Run("nothing-fits", func(t *testing.T) {
			e.unchanged(t, func() {
				res := ok(e.s.AllocateBatch(ctx, f, []string{"rc", "rd"}))(t)
				if len(res) != 1 || res[0].Run != "rc" || res[0].Outcome != storage.AllocNoSlots || res[0].Needed != 4 || res[0].Found != 3 {
					t.Fatalf("res = %+v", res)
				}
			})
		})

		// each worker's channel, and a third worker's that gets nothing
		mustNil(t, e.s.RegisterWorker(ctx, "wC", 1, time.Minute))
		ok(e.s.DrainWorker(ctx, "wC"))(t) // (takes no run)
		sub := e.c.Subscribe(ctx, keyspace.Of(e.s).SlotEvents("wA#1"), keyspace.Of(e.s).SlotEvents("wB"), keyspace.Of(e.s).SlotEvents("wC"))
		defer sub.Close()
		for range 3 {
			if _, err := sub.Receive(ctx); err != nil { // subscription confirmations
				t.Fatal(err)
			}
		}
		ids := []string{"re", "ra", "rb", "rc", "rd"}
		res := ok(e.s.AllocateBatch(ctx, f, ids))(t)
		want := []struct {
			run string
			oc  storage.AllocOutcome
		}{{"re", storage.AllocSkipped}, {"ra", storage.AllocAllocated}, {"rb", storage.AllocAllocated}, {"rc", storage.AllocNoSlots}}
		if len(res) != len(want) {
			t.Fatalf("res = %+v", res)
		}
		for i, w := range want {
			if res[i].Run != w.run || res[i].Outcome != w.oc {
				t.Fatalf("res[%d] = %+v, want %s %s", i, res[i], w.run, w.oc)
			}
		}
		if res[0].State != storage.StateStopped || len(res[1].Assignments) != 2 || len(res[2].Assignments) != 1 ||
			res[3].Needed != 4 || res[3].Found != 0 {
			t.Fatalf("res = %+v", res)
		}
		for id, st := range map[string]storage.State{"ra": storage.StateRunning, "rb": storage.StateRunning,
			"rc": storage.StateLaunched, "rd": storage.StateLaunched, "re": storage.StateStopped} {
			r := ok(e.s.GetRun(ctx, id))(t)
			if r.State != st {
				t.Errorf("%s = %s, want %s", id, r.State, st)
			}
			if id == "ra" && (len(r.Assignments) != 2 || r.Assignments[0] != res[1].Assignments[0] || r.StartedAt.IsZero()) {
				t.Errorf("ra = %+v", r)
			}
		}
		if l := ok(e.s.LaunchedRuns(ctx, 0))(t); strings.Join(l, ",") != "rc,rd" {
			t.Fatalf("launched = %v", l)
		}
		// the announcements name the task-0 slot of each allocated run, one
		// message on the channel of each worker placed on (ra on wA#1's
		// two slots, rb on wB's), none on wC's
		got := messages(t, sub, 2)
		evs := storage.ParseSlotEvents(got[keyspace.Of(e.s).SlotEvents("wA#1")])
		if len(evs) != 1 || evs[0].Run != "ra" || evs[0].Worker != "wA#1" || evs[0].Worker != res[1].Assignments[0].Worker ||
			evs[0].Slot != res[1].Assignments[0].Slot {
			t.Fatalf("wA#1's events %q = %+v, want ra's task-0 slot", got, evs)
		}
		if evs := storage.ParseSlotEvents(got[keyspace.Of(e.s).SlotEvents("wB")]); len(evs) != 1 || evs[0].Run != "rb" || evs[0].Worker != "wB" {
			t.Fatalf("wB's events %q = %+v, want rb's", got, evs)
		}
		// a stop request of a RUNNING run tells its worker, on its channel
		ok(e.s.RequestStop(ctx, "rb", "x"))(t)
		if got := messages(t, sub, 1); len(got) != 1 || got[keyspace.Of(e.s).SlotEvents("wB")] != "wB#0#rb" {
			t.Fatalf("stop of rb announced %q, want wB#0#rb on wB's channel only", got)
		}
		quiet, qcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer qcancel()
		if m, err := sub.ReceiveMessage(quiet); err == nil {
			t.Fatalf("a third message %q on %s, want none (wC got no run)", m.Payload, m.Channel)
		}
		mustNil(t, e.s.DeregisterWorker(ctx, "wC"))
		// PollAssigned reads the announced slots and runs
		w0 := res[1].Assignments[0].Worker
		st := ok(e.s.PollAssigned(ctx, w0, evs))(t)
		found := false
		for _, x := range st {
			if x.Run == "ra" {
				found = x.Token == res[1].Assignments[0].Token && x.RunState == storage.StateRunning && x.Detail != nil && x.Detail.Group == "g"
			}
		}
		if !found {
			t.Fatalf("poll = %+v", st)
		}
		v := ok(e.s.Slots(ctx))(t)
		if v.Free != 0 || v.Assigned != 3 {
			t.Fatalf("slots = %+v", v)
		}
	})
}

// TestStore_AllocateBatchReplay runs the script twice with the same op id
// (what a go-redis retry after EOF does).
func TestStore_AllocateBatchReplay(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := launched(t, e, 1, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 1, time.Minute))
		k := keyspace.Of(e.s)
		src := storage.ScriptSource("allocate_batch")
		keys := []string{k.Fence(), k.Lock(), k.Workers(), k.Slots(), k.Free(), k.Launched(), k.Tokens(), k.LaunchInfo(), k.AllocStop(), k.Run("ra"), k.Run("rb")}
		args := []any{f.Epoch, f.Holder, "op-x", "", "", 0, "", "ra", "rb"}
		first, err := redis.NewScript(src).Run(ctx, e.c, keys, args...).Slice()
		mustNil(t, err)
		before := e.dump(t)
		second, err := redis.NewScript(src).Run(ctx, e.c, keys, args...).Slice()
		mustNil(t, err)
		if len(first) != 2 || len(second) != 2 {
			t.Fatalf("first %v second %v", first, second)
		}
		a1, a2 := first[0].([]any), second[0].([]any)
		if a1[1] != "allocated" || a2[1] != "allocated" || len(a1[2].([]any)) != 4 ||
			a1[2].([]any)[2] != a2[2].([]any)[2] { // same token
			t.Fatalf("first %v second %v", first, second)
		}
		if first[1].([]any)[1] != "no_slots" || second[1].([]any)[1] != "no_slots" {
			t.Fatalf("first %v second %v", first, second)
		}
		if after := e.dump(t); before != after {
			t.Fatalf("replay wrote: %v -> %v", before, after)
		}

		// A call of a pass (pass id set) that stopped marked the pass; its
		// replay still reports what it allocated, and stops where the
		// mark says (rb is not tried again).
		e = e.fresh(t)
		f = launched(t, e, 1, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 1, time.Minute))
		k = keyspace.Of(e.s)
		keys = []string{k.Fence(), k.Lock(), k.Workers(), k.Slots(), k.Free(), k.Launched(), k.Tokens(), k.LaunchInfo(), k.AllocStop(), k.Run("ra"), k.Run("rb")}
		args = []any{f.Epoch, f.Holder, "op-y", "", "", 0, "pass-y", "ra", "rb"}
		first, err = redis.NewScript(src).Run(ctx, e.c, keys, args...).Slice()
		mustNil(t, err)
		if v := e.c.Get(ctx, k.AllocStop()).Val(); v != "pass-y" || len(first) != 2 {
			t.Fatalf("first %v, stop mark %q: want 2 results and the mark pass-y", first, v)
		}
		before = e.dump(t)
		second, err = redis.NewScript(src).Run(ctx, e.c, keys, args...).Slice()
		mustNil(t, err)
		if len(second) != 1 || second[0].([]any)[1] != "allocated" || second[0].([]any)[2].([]any)[2] != first[0].([]any)[2].([]any)[2] {
			t.Fatalf("replay under the mark: %v, want ra allocated again (same token) alone", second)
		}
		if after := e.dump(t); before != after {
			t.Fatalf("replay wrote: %v -> %v", before, after)
		}
	})
}

// TestStore_DirtyContract: a decision is complete for its snapshot (a
// non-empty apply does not re-mark the group dirty), and every change from
// outside a decision marks it dirty.
func TestStore_DirtyContract(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		dirty := func(t *testing.T) bool { return contains(ok(e.s.DirtyGroups(ctx, 0))(t), "g") }
		settle := func(t *testing.T) {
			t.Helper()
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v}))(t)
			if dirty(t) {
				t.Fatal("dirty after settle")
			}
		}
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		for _, id := range []string{"a", "b", "c", "d"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
		}
		v := ok(e.s.GetGroup(ctx, "g"))(t).Version
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c1",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "a"}}}))(t)
		if dirty(t) {
			t.Fatal("dirty after a launch apply with WAITING runs left")
		}
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		as := storagetest.AllocateOne(t, ctx, e.s, f, "a")
		if dirty(t) {
			t.Fatal("allocate marked the group dirty")
		}
		steps := []struct {
			name string
			do   func(t *testing.T)
		}{
			{"set_group", func(t *testing.T) { ok(e.s.SetGroup(ctx, "g", "wait", 2))(t) }},
			{"submit", func(t *testing.T) { ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "e"}))(t) }},
			{"request_stop-waiting", func(t *testing.T) { ok(e.s.RequestStop(ctx, "e", "x"))(t) }},
			{"report", func(t *testing.T) {
				mustNil(t, e.s.Report(ctx, as[0].Worker, "a", as[0].Token, storage.StateSucceeded, ""))
			}},
			{"request_stop-launched", func(t *testing.T) {
				v := ok(e.s.GetGroup(ctx, "g"))(t).Version
				ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c2",
					Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "b"}}}))(t)
				if dirty(t) {
					t.Fatal("dirty after launch")
				}
				ok(e.s.RequestStop(ctx, "b", "x"))(t)
			}},
			{"fail_run", func(t *testing.T) {
				v := ok(e.s.GetGroup(ctx, "g"))(t).Version
				ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c3",
					Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "c"}}}))(t)
				if dirty(t) {
					t.Fatal("dirty after launch")
				}
				mustNil(t, e.s.FailRun(ctx, f, "c", "lost"))
			}},
		}
		// ... and each also PUBLISHes the group on work-events: the
		// leader's wake-up (it does not poll for them).
		ps := e.s.Subscribe(ctx, keyspace.Of(e.s).WorkEvents())
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		msgs := ps.Channel()
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				settle(t)
				s.do(t)
				if !dirty(t) {
					t.Fatalf("%s did not mark the group dirty", s.name)
				}
				for {
					select {
					case m := <-msgs:
						if g, _ := storage.ParseWorkEvent(storage.SplitWorkEvents(m.Payload)[0]); g != "g" {
							continue // an earlier step's second message
						}
					case <-time.After(2 * time.Second):
						t.Fatalf("%s did not publish the group on work-events", s.name)
					}
					break
				}
			})
		}
	})
}

// TestStore_AllocateBackfill: a run that does not fit is passed over and
// the younger runs that fit get the free slots (backfill), in order, until
// it has been LAUNCHED for the guard: then it is held, the batch stops at
// it and nothing younger overtakes it; guard 0 is strict FIFO. A failed
// take gives its slots back for a smaller run.
func TestStore_AllocateBackfill(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		// 2 free slots; ra needs 3 (does not fit), rb 1, rc 2 (does not fit once rb took one), rd 1
		f := launched(t, e, 3, 1, 2, 1)
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		ids := []string{"ra", "rb", "rc", "rd"}

		t.Run("strict", func(t *testing.T) {
			e.unchanged(t, func() {
				res := ok(e.s.AllocateBackfill(ctx, f, ids, 0))(t)
				if len(res) != 1 || res[0].Run != "ra" || res[0].Outcome != storage.AllocNoSlots || !res[0].Held {
					t.Fatalf("guard 0: %+v, want ra held alone", res)
				}
			})
		})
		if _, err := e.s.AllocateBackfill(ctx, f, ids, -time.Second); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("negative guard: %v", err)
		}
		res := ok(e.s.AllocateBackfill(ctx, f, ids, time.Hour))(t)
		want := []struct {
			run  string
			oc   storage.AllocOutcome
			held bool
		}{{"ra", storage.AllocNoSlots, false}, {"rb", storage.AllocAllocated, false}, {"rc", storage.AllocNoSlots, false}, {"rd", storage.AllocAllocated, false}}
		if len(res) != len(want) {
			t.Fatalf("backfill: %+v", res)
		}
		for i, w := range want {
			if res[i].Run != w.run || res[i].Outcome != w.oc || res[i].Held != w.held {
				t.Fatalf("backfill res[%d] = %+v, want %s %s held=%v", i, res[i], w.run, w.oc, w.held)
			}
		}
		if res[0].Needed != 3 || res[0].Found != 2 || res[2].Needed != 2 || res[2].Found != 1 {
			t.Fatalf("needed/found: %+v", res)
		}
		for id, st := range map[string]storage.State{"ra": storage.StateLaunched, "rb": storage.StateRunning,
			"rc": storage.StateLaunched, "rd": storage.StateRunning} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != st {
				t.Errorf("%s = %s, want %s", id, r.State, st)
			}
		}

		// No free slot left: the batch stops at the first misfit, the runs
		// after it are untouched (not even read).
		if res := ok(e.s.AllocateBackfill(ctx, f, []string{"ra", "rc"}, time.Hour))(t); len(res) != 1 || res[0].Run != "ra" || res[0].Found != 0 || res[0].Held {
			t.Fatalf("no free slot: %+v, want ra alone, found 0, not held", res)
		}

		// ra has waited past the guard: held; younger rc does not pass it
		// even when slots free up for rc alone.
		mustNil(t, e.c.HSet(ctx, keyspace.Of(e.s).Run("ra"), "launched_at", time.Now().Add(-2*time.Hour).UnixMilli()).Err())
		mustNil(t, e.s.RegisterWorker(ctx, "wB", 2, time.Minute)) // 2 free: rc would fit
		res = ok(e.s.AllocateBackfill(ctx, f, []string{"ra", "rc"}, time.Hour))(t)
		if len(res) != 1 || res[0].Run != "ra" || !res[0].Held || res[0].Found != 2 {
			t.Fatalf("held: %+v, want ra held alone with 2 found", res)
		}
		if r := ok(e.s.GetRun(ctx, "rc"))(t); r.State != storage.StateLaunched {
			t.Fatalf("rc overtook the held run: %s", r.State)
		}
		// One more slot: ra fits and goes first.
		mustNil(t, e.s.RegisterWorker(ctx, "wC", 1, time.Minute))
		res = ok(e.s.AllocateBackfill(ctx, f, []string{"ra", "rc"}, time.Hour))(t)
		if len(res) != 2 || res[0].Outcome != storage.AllocAllocated || len(res[0].Assignments) != 3 || res[1].Outcome != storage.AllocNoSlots {
			t.Fatalf("after the third slot: %+v, want ra allocated 3 slots, rc no slots", res)
		}
	})
}

// pipeCount counts the round trips a client makes: single commands and
// pipelines, each one.
type pipeCount struct{ trips, cmds int }

func (p *pipeCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *pipeCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { p.trips++; p.cmds++; return next(ctx, cmd) }
}
func (p *pipeCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.trips++
		p.cmds += len(cmds)
		return next(ctx, cmds)
	}
}

// TestStore_AllocatePass: the calls of one pass go in one round trip and
// give what they would give one after another: in order across calls;
// a call that stops (a held run, no free slot) stops the calls after it
// (their runs untouched, not in the results), even where a younger run
// of a later call would fit; a later pass is not stopped by the mark.
func TestStore_AllocatePass(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		t.Run("in-order", func(t *testing.T) {
			e := e.fresh(t)
			f := launched(t, e, 1, 1, 1, 1, 1)
			mustNil(t, e.s.RegisterWorker(ctx, "wA", 4, time.Minute))
			pc := &pipeCount{}
			e.c.AddHook(pc)
			res := ok(e.s.AllocatePass(ctx, f, []string{"ra", "rb", "rc", "rd", "re"}, 2, time.Hour, nil))(t)
			if pc.trips != 1 || pc.cmds != 3 {
				t.Fatalf("%d round trips, %d commands; want 1 and 3 (three calls of at most 2 runs)", pc.trips, pc.cmds)
			}
			want := []storage.AllocOutcome{storage.AllocAllocated, storage.AllocAllocated, storage.AllocAllocated, storage.AllocAllocated, storage.AllocNoSlots}
			if len(res) != len(want) {
				t.Fatalf("results %+v, want %v", res, want)
			}
			for i, w := range want {
				if res[i].Run != "r"+string(rune('a'+i)) || res[i].Outcome != w {
					t.Fatalf("res[%d] = %+v, want r%c %s", i, res[i], 'a'+i, w)
				}
			}
			if r := ok(e.s.GetRun(ctx, "re"))(t); r.State != storage.StateLaunched {
				t.Fatalf("re = %s, want LAUNCHED (no slot left)", r.State)
			}
		})
		t.Run("stopped-call-stops-the-pass", func(t *testing.T) {
			e := e.fresh(t)
			// 2 free slots; ra needs 3 (held at once: guard 0), rb, rc, rd 1 each
			f := launched(t, e, 3, 1, 1, 1)
			mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
			res := ok(e.s.AllocatePass(ctx, f, []string{"ra", "rb", "rc"}, 1, 0, nil))(t)
			if len(res) != 1 || res[0].Run != "ra" || !res[0].Held {
				t.Fatalf("results %+v, want ra held alone", res)
			}
			for _, id := range []string{"rb", "rc"} {
				if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateLaunched {
					t.Fatalf("%s = %s: a call after the held run placed it", id, r.State)
				}
			}
			// a new pass is not stopped by that pass's mark; its third call
			// finds no free slot and ends the results
			res = ok(e.s.AllocatePass(ctx, f, []string{"rb", "rc", "rd"}, 1, time.Hour, nil))(t)
			if len(res) != 3 || res[0].Outcome != storage.AllocAllocated || res[1].Outcome != storage.AllocAllocated ||
				res[2].Run != "rd" || res[2].Outcome != storage.AllocNoSlots || res[2].Found != 0 {
				t.Fatalf("next pass: %+v, want rb and rc allocated, rd no slots (found 0)", res)
			}
		})
		t.Run("errors", func(t *testing.T) {
			e := e.fresh(t)
			f := launched(t, e, 1)
			e.unchanged(t, func() {
				if _, err := e.s.AllocatePass(ctx, f, []string{"ra"}, 1, -time.Second, nil); !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("negative guard: %v", err)
				}
				if _, err := e.s.AllocatePass(ctx, f, []string{"ra", "bad id"}, 1, time.Hour, nil); !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("invalid id: %v", err)
				}
				stale := storage.Fence{Epoch: f.Epoch + 1, Holder: f.Holder}
				if _, err := e.s.AllocatePass(ctx, stale, []string{"ra"}, 1, time.Hour, nil); !errors.Is(err, storage.ErrFenced) {
					t.Fatalf("stale fence: %v", err)
				}
			})
		})
	})
}

// TestStore_MaxRunSlots: the leader's bound on a run's slots (fenced);
// submit and SubmitBatch refuse a run asking more, naming the bound,
// nothing written; 1-slot runs never read it; 0 removes it.
func TestStore_MaxRunSlots(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		e.unchanged(t, func() {
			if err := e.s.SetMaxRunSlots(ctx, storage.Fence{Epoch: f.Epoch + 1, Holder: f.Holder}, 4); !errors.Is(err, storage.ErrFenced) {
				t.Fatalf("unfenced: %v", err)
			}
			if err := e.s.SetMaxRunSlots(ctx, f, limits.MaxRunSlots+1); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("over the built-in bound: %v", err)
			}
		})
		mustNil(t, e.s.SetMaxRunSlots(ctx, f, 4))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "four", Slots: 4}))(t)
		// another client of the namespace reads the setting
		oc := redis.NewClient(e.c.Options())
		defer oc.Close()
		other, err := storage.New(oc, e.s.Namespace())
		mustNil(t, err)
		e.unchanged(t, func() {
			_, err := other.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "five", Slots: 5})
			if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "takes at most 4 (the leader's serve --max-run-slots)") {
				t.Fatalf("5 slots: %v", err)
			}
			res := other.SubmitBatch(ctx, []storage.SubmitRequest{{Group: "g", ID: "b5", Slots: 5}})
			if !errors.Is(res[0].Err, storage.ErrInvalid) {
				t.Fatalf("batch 5 slots: %v", res[0].Err)
			}
		})
		mustNil(t, e.s.SetMaxRunSlots(ctx, f, 0))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "five", Slots: 5}))(t) // this store's cache follows its own write
		if m, err := e.s.NamespaceMaxRunSlots(ctx); err != nil || m != 0 {
			t.Fatalf("after removing: %d %v", m, err)
		}
	})
}
