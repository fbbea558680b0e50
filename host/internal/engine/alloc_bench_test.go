package engine

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// BenchmarkSlotManager_allocate is the cost of placing launched runs with
// the allocation policy in the path (issue 26): a worker with 64 slots, 32
// of them freed before each pass, and `launched` runs waiting (refilled
// after each pass, untimed). "batch" is the pass before allocation
// policies (the head of the launched zset, AllocateBackfill in seq
// order); fifo and fair are Pass with that namespace policy. Reported per
// allocated run: wall ns (host and round trips) and Redis CPU µs (INFO
// used_cpu_user+sys around each pass). BENCHMARKS.md "Allocation policies".
//
//	go test ./host/internal/engine -run '^$' -bench SlotManager_allocate -benchtime 200x -count 5
func BenchmarkSlotManager_allocate(b *testing.B) {
	for _, queued := range []int{128, 10_000} {
		for _, mode := range []string{"batch", "fifo", "fair"} {
			b.Run(fmt.Sprintf("launched=%d/%s", queued, mode), func(b *testing.B) { benchAllocate(b, queued, mode) })
		}
	}
}

const benchFree = 32

func benchAllocate(b *testing.B, queued int, mode string) {
	e := newREnv(b, Config{SlotInterval: time.Second}) // as served: the live-slot count is read at most every second
	ctx := context.Background()
	e.worker("w1", 2*benchFree, time.Hour)
	if mode != "batch" {
		e.setAllocation(storage.AllocationSettings{Policy: mode, FairLabel: "tenant"})
	}
	seq := 0
	queue := func(n int) {
		const perGroup = 500
		for n > 0 {
			g := fmt.Sprintf("q%d", seq/perGroup)
			k := min(n, perGroup-seq%perGroup)
			if seq%perGroup == 0 {
				e.group(g, "wait", 10_000)
			}
			reqs := make([]storage.SubmitRequest, k)
			acts := make([]storage.Action, k)
			for i := range reqs {
				id := fmt.Sprintf("r%06d", seq+i)
				reqs[i] = storage.SubmitRequest{Group: g, ID: id, Labels: []abi.Label{{Key: "tenant", Value: fmt.Sprintf("t%d", (seq+i)%10)}}}
				acts[i] = storage.Action{Kind: storage.ActionLaunch, Run: id}
			}
			for _, r := range e.st.SubmitBatch(ctx, reqs) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			gr, err := e.st.GetGroup(ctx, g)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := storagetest.Apply(ctx, e.st, e.lease.Fence(), g, storage.Decision{Version: gr.Version, ClaimID: fmt.Sprintf("c%d", seq), Actions: acts, NoPlace: true}); err != nil {
				b.Fatal(err)
			}
			seq += k
			n -= k
		}
	}
	queue(queued + benchFree)
	pass := func() int {
		if mode == "batch" {
			ids, err := e.st.LaunchedRuns(ctx, DefaultBatchSize)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for lo := 0; lo < len(ids); lo += storage.AllocChunk {
				res, err := storagetest.AllocateBackfill(ctx, e.st, e.lease.Fence(), ids[lo:min(lo+storage.AllocChunk, len(ids))], DefaultSlotGuard)
				if err != nil {
					b.Fatal(err)
				}
				full := false
				for _, r := range res {
					if r.Outcome == storage.AllocAllocated {
						n++
					}
					full = full || (r.Outcome == storage.AllocNoSlots && r.Found == 0)
				}
				if full {
					break
				}
			}
			return n
		}
		return e.slotPass()
	}
	pass() // the first 32 take their slots
	var running []storage.Run
	var cpu float64
	var wall time.Duration
	allocated := 0
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		// free 32 slots, refill the queue to `queued`
		sv, err := e.st.Slots(ctx)
		if err != nil {
			b.Fatal(err)
		}
		running = running[:0]
		seen := map[string]bool{}
		for _, w := range sv.Workers {
			for _, s := range w.Slots {
				if s.Run != "" && !seen[s.Run] {
					seen[s.Run] = true
					running = append(running, storage.Run{ID: s.Run})
				}
			}
		}
		sort.Slice(running, func(i, j int) bool { return running[i].ID < running[j].ID })
		for _, r := range running[:min(benchFree, len(running))] {
			e.finish(r.ID)
		}
		queue(benchFree)
		before, err := e.st.ServerStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		n := pass()
		wall += time.Since(t0)
		b.StopTimer()
		after, err := e.st.ServerStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n != benchFree {
			b.Fatalf("allocated %d, want %d", n, benchFree)
		}
		cpu += after.CPUSeconds - before.CPUSeconds
		allocated += n
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(wall.Nanoseconds())/float64(allocated), "ns/run")
	b.ReportMetric(cpu*1e6/float64(allocated), "redis-us/run")
}

// BenchmarkPlacement is the cost of choosing the worker of 64 runs among
// W live workers (half of their slots free, room for the runs, in 4 zones): "spread" is the
// host's built-in (placeRuns, native Go), "zone-spread" the catalog's
// placing policy in the sandbox (its decision, validated, then the slots
// named). Per decision. BENCHMARKS.md "Placement".
//
//	go test ./host/internal/engine -run '^$' -bench Placement -count 7
func BenchmarkPlacement(b *testing.B) {
	ctx := context.Background()
	wasm, err := os.ReadFile("../../../examples/zone-spread/zone-spread.wasm")
	if err != nil {
		b.Fatal(err)
	}
	rt, err := policies.NewRuntime(ctx, policies.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	zs, err := rt.Load(ctx, "zone-spread", wasm)
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{10, 100, 1000} {
		snap := &abi.AllocationSnapshot{Params: []abi.Label{{Key: "zone_label", Value: "zone"}}}
		free := map[string][]string{}
		for w := range workers {
			id := fmt.Sprintf("worker-%04d", w)
			n := max(4, 128/workers) // free slots: room for the 64 runs
			snap.Workers = append(snap.Workers, abi.WorkerCapacity{Worker: id, Slots: uint32(2 * n), Free: uint32(n),
				Labels: []abi.Label{{Key: "zone", Value: fmt.Sprint("z", w%4)}}})
			for i := n; i < 2*n; i++ {
				free[id] = append(free[id], fmt.Sprintf("%s#%d", id, i))
			}
			snap.Free += uint32(n)
			snap.Total += uint32(2 * n)
		}
		order := make([]uint32, 64)
		for i := range order {
			snap.Runs = append(snap.Runs, abi.AllocRun{ID: fmt.Sprintf("run-%06d", i), Group: "g", Seq: uint64(i + 1), Slots: 1})
			order[i] = uint32(i)
		}
		b.Run(fmt.Sprintf("workers=%d/spread", workers), func(b *testing.B) {
			d := &abi.AllocationDecision{Order: order}
			for b.Loop() {
				if len(placeRuns(snap, d, order, abi.PlacementSpread, free)) != 64 {
					b.Fatal("not all placed")
				}
			}
		})
		b.Run(fmt.Sprintf("workers=%d/zone-spread", workers), func(b *testing.B) {
			for b.Loop() {
				d, err := zs.DecideAllocation(ctx, snap)
				if err != nil {
					b.Fatal(err)
				}
				if len(placeRuns(snap, &d, d.Order, abi.PlacementPolicy, free)) != 64 {
					b.Fatal("not all placed")
				}
			}
		})
	}
}
