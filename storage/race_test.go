package storage_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// raceRounds: 8 goroutines x rounds. Real Redis: 1000 rounds in ~0.8s.
// miniredis compiles the Lua per call (1000 rounds took 5.6s, far more under
// -race), so the embedded backend runs 300 rounds.
const raceRounds, raceRoundsEmbedded = 1000, 300

// TestStore_RaceLaunch: 8 goroutines holding the same stale snapshot race to
// launch the same WAITING run; exactly one launch per round.
func TestStore_RaceLaunch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		rounds := raceRounds
		if e.backend == "embedded" {
			rounds = raceRoundsEmbedded
		}
		if testing.Short() {
			rounds = 200
		}
		for i := 0; i < rounds; i++ {
			id := fmt.Sprintf("r%d", i)
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
			sn := ok(e.s.Snapshot(ctx, "g"))(t)
			var wins, losses atomic.Int32
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					_, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: fmt.Sprintf("c%d-%d", i, g),
						Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: id}}})
					switch {
					case err == nil:
						wins.Add(1)
					case errors.Is(err, storage.ErrStale), errors.Is(err, storage.ErrBadState):
						losses.Add(1)
					default:
						t.Errorf("unexpected %v", err)
					}
				}(g)
			}
			wg.Wait()
			if wins.Load() != 1 || losses.Load() != 7 {
				t.Fatalf("round %d: %d launches, %d losses", i, wins.Load(), losses.Load())
			}
			// finish it so the next round is comparable
			ok(e.s.RequestStop(ctx, id, "x"))(t)
		}
		if n := len(ok(e.s.ListRuns(ctx, storage.RunFilter{State: storage.StateStopped, Limit: 100000}))(t)); n != rounds {
			t.Fatalf("%d stopped runs, want %d", n, rounds)
		}
	})
}

// TestStore_RaceLaunchDiscard: launch and discard of one run race; exactly one wins.
func TestStore_RaceLaunchDiscard(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		for i := 0; i < 200; i++ {
			id := fmt.Sprintf("r%d", i)
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for j, kind := range []storage.ActionKind{storage.ActionLaunch, storage.ActionDiscard} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[j] = e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: fmt.Sprintf("%s-%d", kind, i),
						Actions: []storage.Action{{Kind: kind, Run: id}}})
				}()
			}
			wg.Wait()
			if (errs[0] == nil) == (errs[1] == nil) {
				t.Fatalf("round %d: launch %v, discard %v: want exactly one winner", i, errs[0], errs[1])
			}
			r := ok(e.s.GetRun(ctx, id))(t)
			if (errs[0] == nil && r.State != storage.StateLaunched) || (errs[1] == nil && r.State != storage.StateDiscarded) {
				t.Fatalf("round %d: state %s", i, r.State)
			}
			if r.State == storage.StateLaunched {
				ok(e.s.RequestStop(ctx, id, "x"))(t)
			}
		}
	})
}

// TestStore_RaceAllocate: runs race for the last free slots; never over-allocated.
func TestStore_RaceAllocate(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		for round := 0; round < 20; round++ {
			e := e.fresh(t)
			f := launched(t, e, 2, 2, 2, 2, 2, 2, 2, 2)
			mustNil(t, e.s.RegisterWorker(ctx, "wA", 3, time.Minute))
			mustNil(t, e.s.RegisterWorker(ctx, "wB", 2, time.Minute)) // 5 slots: at most 2 runs of 2
			var wins atomic.Int32
			var wg sync.WaitGroup
			for i := 0; i < 8; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := storagetest.TryAllocateOne(ctx, e.s, f, "r"+string(rune('a'+i)))
					if err == nil {
						wins.Add(1)
					} else if !errors.Is(err, storage.ErrNoSlots) {
						t.Errorf("allocate: %v", err)
					}
				}()
			}
			wg.Wait()
			v := ok(e.s.Slots(ctx))(t)
			if wins.Load() != 2 || v.Assigned != 4 || v.Free != 1 {
				t.Fatalf("round %d: %d allocations, view %+v", round, wins.Load(), v)
			}
		}
	})
}

// cmdCounter counts commands sent (pipelines count each command), or
// only those named only.
type cmdCounter struct {
	n    atomic.Int64
	only string
}

func (c *cmdCounter) add(cmd redis.Cmder) {
	if c.only == "" || cmd.Name() == c.only {
		c.n.Add(1)
	}
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.add(cmd); return next(ctx, cmd) }
}
func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestStore_RoundTrips: a snapshot+apply cycle over a group of 50 runs (a
// window of 32 holds them all) is two commands, not one per record.
func TestStore_RoundTrips(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Window: 32}))(t)
		for i := 0; i < 50; i++ {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g"}))(t)
		}
		cc := &cmdCounter{}
		e.c.AddHook(cc)
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		var acts []storage.Action
		for i, r := range sn.Waiting {
			k := storage.ActionDiscard
			if i == len(sn.Waiting)-1 {
				k = storage.ActionLaunch
			}
			acts = append(acts, storage.Action{Kind: k, Run: r.ID})
		}
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c", Actions: acts}))(t)
		if n := cc.n.Load(); n != 2 || len(sn.Waiting) != 50 {
			t.Fatalf("snapshot+apply over %d runs sent %d commands, want 2", len(sn.Waiting), n)
		}
	})
}
