package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestAPIBench measures the HTTP API beside the engine, on one
// redis-server with one `serve --api-addr` and one simulated worker:
//
//   - direct: 16 clients submit the runs with storage.SubmitBatch (the
//     engine's own load generator), no viewers;
//   - api: 16 clients POST the runs to the API, one per request;
//   - viewers: as direct, with 100 clients reading /events (server-sent
//     events) for the whole run.
//
// For each: submits/s and the engine's finishes/s (runs / first submit to
// last final), rounds alternated. Opt-in (figures in BENCHMARKS.md, "HTTP
// API and UI"):
//
//	WASMSCHED_API_BENCH=1 go test ./tests -run TestAPIBench -v -timeout 30m
func TestAPIBench(t *testing.T) {
	if os.Getenv("WASMSCHED_API_BENCH") == "" {
		t.Skip("set WASMSCHED_API_BENCH=1 to run")
	}
	const (
		runs    = 4000
		groups  = 64
		clients = 16
		viewers = 100
		rounds  = 3
	)
	r := redistest.Start(t)
	ctx := testCtx(t, 25*time.Minute)
	st := Store(t, r, "apib")
	host := Serve(t, "host", r, "apib", "127.0.0.1:7971", rtLeaseTTL, "--api-addr", "127.0.0.1:7972", "--retention", "0")
	host.WaitLog(t, 10*time.Second, "became leader")
	host.WaitLog(t, 10*time.Second, "api server listening")
	StartWorker(t, "worker", r, "apib", "127.0.0.1:7981", 64)
	base := "http://127.0.0.1:7972/api/v1/namespaces/apib"
	for g := range groups {
		if _, err := st.SetGroup(ctx, fmt.Sprintf("g%02d", g), "wait", 1); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	backlog := func() int { return Backlog(t, st) }
	type result struct {
		mode             string
		submitsPS, finPS float64
		events, missed   int64
	}
	var results []result
	round := func(mode string, rd int) result {
		prefix := fmt.Sprintf("%s%d-", mode, rd)
		var vwg sync.WaitGroup
		var events, missed atomic.Int64
		vctx, stopViewers := context.WithCancel(ctx)
		if mode == "viewers" {
			ready := make(chan struct{}, viewers)
			for range viewers {
				vwg.Add(1)
				go func() {
					defer vwg.Done()
					req, _ := http.NewRequestWithContext(vctx, "GET", base+"/events", nil)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						ready <- struct{}{}
						return
					}
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(make([]byte, 64<<10), 1<<20)
					first := true
					for sc.Scan() {
						if first {
							ready <- struct{}{}
							first = false
						}
						switch sc.Text() {
						case "event: run":
							events.Add(1)
						case "event: missed":
							missed.Add(1)
						}
					}
				}()
			}
			for range viewers {
				<-ready
			}
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= runs {
						return
					}
					g := fmt.Sprintf("g%02d", i%groups)
					id := fmt.Sprintf("%s%05d", prefix, i)
					if mode == "api" {
						resp, err := hc.Post(base+"/groups/"+g+"/runs", "application/json", strings.NewReader(`{"id": "`+id+`"}`))
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							t.Errorf("submit %s: %s", id, resp.Status)
							return
						}
						continue
					}
					if _, err := st.Submit(ctx, storage.SubmitRequest{Group: g, ID: id}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		sub := time.Since(t0)
		WaitFor(t, 5*time.Minute, "every run final", func() bool { return backlog() == 0 })
		fin := time.Since(t0)
		stopViewers()
		vwg.Wait()
		res := result{mode: mode, submitsPS: runs / sub.Seconds(), finPS: runs / fin.Seconds(), events: events.Load(), missed: missed.Load()}
		t.Logf("round %d %-8s submits/s %6.0f  finishes/s %6.0f  viewer events %d missed %d", rd, mode, res.submitsPS, res.finPS, res.events, res.missed)
		return res
	}
	for rd := range rounds {
		for _, mode := range []string{"direct", "api", "viewers"} {
			results = append(results, round(mode, rd))
		}
	}
	med := func(mode string, f func(result) float64) float64 {
		var xs []float64
		for _, r := range results {
			if r.mode == mode {
				xs = append(xs, f(r))
			}
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	sub := func(r result) float64 { return r.submitsPS }
	fin := func(r result) float64 { return r.finPS }
	t.Logf("medians of %d rounds, %d runs each, %d clients:", rounds, runs, clients)
	for _, m := range []string{"direct", "api", "viewers"} {
		t.Logf("  %-8s submits/s %6.0f  finishes/s %6.0f (%.2fx direct)", m, med(m, sub), med(m, fin), med(m, fin)/med("direct", fin))
	}
	var ev, missed int64
	for _, r := range results {
		if r.mode == "viewers" {
			ev, missed = max(ev, r.events), max(missed, r.missed)
		}
	}
	t.Logf("viewers: at most %d run events and %d \"missed\" notices in a round (%d viewers x %d runs)", ev, missed, viewers, runs)
	if ev == 0 {
		t.Error("the viewers saw no event")
	}
}
