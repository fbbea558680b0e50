package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestRetentionSoak pushes runs through one namespace (a `serve` with
// --retention and a simulated `worker`) and samples Redis used_memory as
// it goes: with a 1 s retention the finished runs leave Redis as fast as
// they come, so memory stays flat instead of growing with the runs.
//
// In CI it pushes 20,000 runs. The figure in BENCHMARKS.md ("Retention")
// is the full soak, and the same soak without retention beside it:
//
//	WASMSCHED_SOAK_RUNS=200000 go test ./tests -run TestRetentionSoak -v -timeout 30m
//	WASMSCHED_SOAK_RUNS=200000 WASMSCHED_SOAK_RETENTION=0 go test ./tests -run TestRetentionSoak -v -timeout 30m
//
// Without retention (0) it asserts nothing: it prints the curve to compare.
func TestRetentionSoak(t *testing.T) {
	runs := 20_000
	if v := os.Getenv("WASMSCHED_SOAK_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("WASMSCHED_SOAK_RUNS=%q: want a number >= 1000", v)
		}
		runs = n
	}
	retention := "1s"
	if v := os.Getenv("WASMSCHED_SOAK_RETENTION"); v != "" {
		retention = v
	}
	const (
		groups   = 64
		batch    = 500
		inFlight = 4000 // submit no further ahead of the engine than this
		samples  = 10
	)
	r := redistest.Start(t)
	ctx := testCtx(t, 25*time.Minute)
	st := Store(t, r, "soak")
	rdb := r.Client(t)
	host := Serve(t, "host", r, "soak", "127.0.0.1:7951", rtLeaseTTL, "--retention", retention)
	host.WaitLog(t, 10*time.Second, "became leader")
	StartWorker(t, "worker", r, "soak", "127.0.0.1:7961", 64)
	for g := range groups {
		if _, err := st.SetGroup(ctx, fmt.Sprintf("g%02d", g), "wait", 1); err != nil {
			t.Fatal(err)
		}
	}
	backlog := func() int { return Backlog(t, st) }
	type sample struct {
		runs int
		at   time.Duration
		mem  int64
	}
	base := usedMemory(t, rdb)
	curve := []sample{{0, 0, base}}
	t0 := time.Now()
	reqs := make([]storage.SubmitRequest, 0, batch)
	for lo := 0; lo < runs; lo += batch {
		reqs = reqs[:0]
		for i := lo; i < min(lo+batch, runs); i++ {
			reqs = append(reqs, storage.SubmitRequest{Group: fmt.Sprintf("g%02d", i%groups), ID: fmt.Sprintf("s%07d", i)})
		}
		for _, res := range st.SubmitBatch(ctx, reqs) {
			if res.Err != nil {
				t.Fatalf("submit: %v", res.Err)
			}
		}
		for backlog() > inFlight {
			time.Sleep(20 * time.Millisecond)
		}
		if done := lo + len(reqs); done%(runs/samples) < batch {
			curve = append(curve, sample{done, time.Since(t0), usedMemory(t, rdb)})
		}
	}
	WaitFor(t, 5*time.Minute, "every run final", func() bool { return backlog() == 0 })
	took := time.Since(t0)
	if retention != "0" {
		d, err := time.ParseDuration(retention)
		if err != nil {
			t.Fatalf("WASMSCHED_SOAK_RETENTION=%q: %v", retention, err)
		}
		time.Sleep(d + 3*time.Second) // one retention and a few rounds
	}
	end := usedMemory(t, rdb)
	curve = append(curve, sample{runs, time.Since(t0), end})
	t.Logf("retention %s, %d runs through %d groups in %v (%.0f runs/s); Redis used_memory:", retention, runs, groups,
		took.Round(time.Millisecond), float64(runs)/took.Seconds())
	for _, s := range curve {
		t.Logf("  runs %7d  t %6.1fs  used_memory %7.2f MiB", s.runs, s.at.Seconds(), float64(s.mem)/(1<<20))
	}
	left, err := rdb.ZCard(ctx, keyspace.Of(st).Runs()).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("runs left in the runs index: %d", left)
	if retention == "0" {
		return
	}
	// Bounded: the second half of the soak never needs much more than the
	// first (without retention it holds twice the runs), and once the last
	// runs are past their retention Redis is back near where it started.
	var early, late int64
	for _, s := range curve[1 : len(curve)-1] {
		if s.runs <= runs/2 {
			early = max(early, s.mem)
		} else {
			late = max(late, s.mem)
		}
	}
	if late > early+early/4+2<<20 {
		t.Errorf("used_memory grew: max %.2f MiB in the first half, %.2f MiB in the second", float64(early)/(1<<20), float64(late)/(1<<20))
	}
	if end > base+2<<20 || left != 0 {
		t.Errorf("after the retention: used_memory %.2f MiB (start %.2f), %d runs left", float64(end)/(1<<20), float64(base)/(1<<20), left)
	}
}

// Backlog is the namespace's waiting and active runs, over all groups.
func Backlog(t testing.TB, st *storage.Store) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := st.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range gs {
		n += g.Waiting + g.Active
	}
	return n
}
