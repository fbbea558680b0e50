package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// TestScaleOutBench measures aggregate launches/s of 3 namespaces, each
// driven by its own `wasmsched bench` process (in-process host + workers),
// on a Redis Cluster of 1, 2 and 3 masters (the namespaces spread evenly
// over the masters). Opt-in: WASMSCHED_SCALEOUT_BENCH=1 (figures in
// BENCHMARKS.md, "Scale out").
func TestScaleOutBench(t *testing.T) {
	if os.Getenv("WASMSCHED_SCALEOUT_BENCH") == "" {
		t.Skip("set WASMSCHED_SCALEOUT_BENCH=1 to run")
	}
	const nNS, runs, groups = 3, 3000, 100
	for shards := 1; shards <= 3; shards++ {
		cl := redistest.StartCluster(t, shards)
		ctx := testCtx(t, 5*time.Minute)
		cc := cl.Client(t)
		// nNS namespaces, round-robin over the masters.
		var nss []string
		per := map[string]int{}
		for i := 0; len(nss) < nNS && i < 1000; i++ {
			ns := fmt.Sprintf("b%d-%02d", shards, i)
			slot, err := cc.ClusterKeySlot(ctx, keyspace.New(ns).Fence()).Result()
			if err != nil {
				t.Fatal(err)
			}
			o := cl.SlotOwner(ctx, t, slot)
			if per[o] < (nNS+shards-1)/shards {
				per[o]++
				nss = append(nss, ns)
			}
		}
		type res struct {
			LaunchesPerSec float64 `json:"launches_per_sec"`
			LaunchSeconds  float64 `json:"launch_seconds"`
			Runs           int     `json:"runs"`
		}
		var (
			mu  sync.Mutex
			all []res
			wg  sync.WaitGroup
		)
		start := time.Now()
		for _, ns := range nss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := exec.CommandContext(ctx, Binary(t), "--redis", cl.URL(), "-n", ns, "bench",
					"--groups", fmt.Sprint(groups), "--runs", fmt.Sprint(runs), "--workers", "2", "--slots", "64",
					"--clients", "8", "-o", "json").Output()
				if err != nil {
					t.Errorf("bench %s: %v: %s", ns, err, out)
					return
				}
				var r res
				if err := json.Unmarshal(out, &r); err != nil {
					t.Errorf("bench %s: %v: %s", ns, err, out)
					return
				}
				mu.Lock()
				all = append(all, r)
				mu.Unlock()
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		sum, total := 0.0, 0
		for _, r := range all {
			sum += r.LaunchesPerSec
			total += r.Runs
		}
		t.Logf("shards=%d namespaces per master=%v: sum of launches/s = %.0f; %d runs in %.1fs wall (%.0f runs/s incl. process start)",
			shards, per, sum, total, wall.Seconds(), float64(total)/wall.Seconds())
	}
}
