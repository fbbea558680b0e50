package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/bench"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// TestBenchSmall runs a tiny bench end to end (in-process host and workers
// against a real redis-server): every run succeeds, the figures are there
// (the Redis cost per run: one submit and one report script each, the
// scripts' sampled times), and the generated namespace is deleted
// afterwards.
func TestBenchSmall(t *testing.T) {
	srv := redistest.Start(t)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resetCommandFlags()
	code := run(ctx, []string{"wasmsched", "bench", "--redis", srv.URL(), "--groups", "5", "--runs", "40",
		"--workers", "2", "--slots", "4", "--lease-ttl", "500ms", "--timeout", "50s", "--script-times", "-o", "json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench: exit %d, stderr %s", code, errb.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("bench -o json: %v: %q", err, out.String())
	}
	if res.States["SUCCEEDED"] != 40 || len(res.States) != 1 {
		t.Fatalf("bench states %v, want 40 SUCCEEDED", res.States)
	}
	c := res.Redis
	if c == nil || c.USPerRun <= 0 || c.ScriptUSPerRun <= 0 || c.CPUUSPerRun <= 0 || c.CommandsPerRun < 2 {
		t.Fatalf("bench redis cost %+v: want the time and commands per run", c)
	}
	// a worker's reports go as report calls of up to 32 runs: one a run at most
	if n := c.Commands["script report"]; n < 1.0/32 || n > 1 {
		t.Errorf("script report per run = %v, want 1/32 to 1 (commands %v)", n, c.Commands)
	}
	// the clients' batches of 32 go as one submit call each (64 runs a call at most)
	if n := c.Commands["script submit"]; n < 1.0/32 || n > 0.5 {
		t.Errorf("script submit per run = %v, want a call per batch (commands %v)", n, c.Commands)
	}
	times := map[string]bench.ScriptCost{}
	for _, s := range c.Scripts {
		times[s.Name] = s
	}
	if s := times["submit"]; s.USPerRun <= 0 || s.CallsPerRun != c.Commands["script submit"] || s.SampledUSPerCall <= 0 {
		t.Errorf("submit's sampled time %+v (scripts %+v)", s, c.Scripts)
	}
	if res.LaunchesPerSec <= 0 || res.SubmitToRun.Max < res.SubmitToRun.P50 || !res.CleanedUp {
		t.Fatalf("bench result %+v: want figures and cleaned_up", res)
	}
	if res.ListpackValue != 64 {
		t.Errorf("hash_max_listpack_value %d, want the fresh server's 64", res.ListpackValue)
	}
	if !strings.HasPrefix(res.Namespace, "bench-") {
		t.Fatalf("namespace %q: want a generated bench-<unix>", res.Namespace)
	}
	keys, err := srv.Client(t).Keys(ctx, "ws:{"+res.Namespace+"}:*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left in %s: %v %v", res.Namespace, keys, err)
	}
}

func TestBenchDevUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--groups", "0"}, "--groups"},
		{[]string{"bench", "--clients", "0"}, "--clients"},
		{[]string{"bench", "--heartbeat-ttl", "1ms"}, "--heartbeat-ttl"},
		{[]string{"bench", "extra"}, "unexpected arguments"},
		{[]string{"bench", "--slowlog", "--script-times"}, "--script-times"},
		{[]string{"dev", "--slots", "0"}, "--slots"},
		{[]string{"dev", "--addr", ""}, "--addr"},
		{[]string{"dev", "--log-level", "loud"}, "--log-level"},
	} {
		var out, errb bytes.Buffer
		resetCommandFlags()
		code := run(context.Background(), append([]string{"wasmsched"}, tc.args...), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestBench_policy: --policy sets the generated groups' policy; every run
// ends as that policy implies (a burst into one priority group: the newest
// runs, the others are discarded).
func TestBench_policy(t *testing.T) {
	srv := redistest.Start(t)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resetCommandFlags()
	code := run(ctx, []string{"wasmsched", "bench", "--redis", srv.URL(), "--groups", "1", "--runs", "30", "--policy", "priority",
		"--workers", "1", "--slots", "4", "--lease-ttl", "500ms", "--timeout", "50s", "-o", "json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("bench: exit %d, stderr %s", code, errb.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("bench -o json: %v: %q", err, out.String())
	}
	if res.Policy != "priority" || res.States["SUCCEEDED"]+res.States["DISCARDED"]+res.States["STOPPED"] != 30 || res.States["SUCCEEDED"] < 1 {
		t.Fatalf("bench with priority groups: %+v", res)
	}
	resetCommandFlags()
	errb.Reset()
	if code := run(ctx, []string{"wasmsched", "bench", "--redis", srv.URL(), "--groups", "1", "--policy", "reuse"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "--policy reuse") {
		t.Fatalf("bench --policy reuse: exit %d, %s", code, errb.String())
	}
}
