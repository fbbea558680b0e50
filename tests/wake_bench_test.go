package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// redisCost sums INFO commandstats: calls and usec of every command
// (scripts' inner commands included, as Redis counts them).
func redisCost(tb testing.TB, c redis.UniversalClient) (calls, usec int64) {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, kv, _ := strings.Cut(strings.TrimSpace(line), ":")
		for _, f := range strings.Split(kv, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}

// BenchmarkWakes: one leader with WASMSCHED_BENCH_WAKE_GROUPS (default
// 10,000) groups whose policy asks to be woken every second (the
// wakeloop test policy, period=1000): the wakes it fires per second over a
// 10 s window, and Redis's cost per wake (commands and microseconds, from
// INFO commandstats: the timer's reads, the due scripts, the snapshots and
// the applies that set the next wake). Run:
//
//	go test ./tests -run XXX -bench BenchmarkWakes -benchtime 1x
func BenchmarkWakes(b *testing.B) {
	groups := 10_000
	if v, err := strconv.Atoi(os.Getenv("WASMSCHED_BENCH_WAKE_GROUPS")); err == nil && v > 0 {
		groups = v
	}
	wasm := filepath.Join(b.TempDir(), "wakeloop.wasm")
	if o, code := RunCLI(b, "policy", "build", "./testdata/wakeloop", "--out", wasm); code != 0 {
		b.Fatalf("policy build: exit %d: %s", code, o)
	}
	for b.Loop() {
		r := redistest.Start(b)
		const ns = "wakes"
		h := ServeAdmin(b, "host", r, ns, "127.0.0.1:7791")
		cli(b, r, ns, "policy", "push", "wakeloop", wasm)
		st := Store(b, r, ns)
		ctx := context.Background()
		for i := range groups {
			if _, err := st.SetGroupSettings(ctx, fmt.Sprintf("g%05d", i), storage.GroupSettings{Policy: "wakeloop",
				Params: []abi.Label{{Key: "period", Value: "1000"}}}); err != nil {
				b.Fatal(err)
			}
		}
		wakes := func() float64 { return h.Metrics(b, "wasmsched_wakes_total", "namespace")[ns] }
		time.Sleep(3 * time.Second) // every group decided once and waking
		rc := r.Client(b)
		w0, c0, u0, t0 := wakes(), 0.0, 0.0, time.Now()
		{
			c, u := redisCost(b, rc)
			c0, u0 = float64(c), float64(u)
		}
		time.Sleep(10 * time.Second)
		w1, el := wakes(), time.Since(t0)
		c1, u1 := redisCost(b, rc)
		n := w1 - w0
		b.ReportMetric(n/el.Seconds(), "wakes/s")
		b.ReportMetric((float64(c1)-c0)/n, "redis-cmds/wake")
		b.ReportMetric((float64(u1)-u0)/n, "redis-µs/wake")
		b.ReportMetric((float64(u1)-u0)/el.Seconds()/1e4, "redis-busy-%")
	}
}
