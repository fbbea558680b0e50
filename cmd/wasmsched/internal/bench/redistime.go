package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/rediscount"
	"github.com/wasmsched/wasmsched/storage"
)

// RedisCost is what the measured runs cost Redis, per run: the time Redis
// spent executing the commands the engine, its workers and the submitting
// clients sent (INFO commandstats deltas: exact for scripts; a direct
// command's share of its command's time is apportioned by the calls this
// process sent of it), how many commands they sent (a go-redis hook on
// their connections), and the server's CPU (used_cpu_user+sys: everything,
// the bench's own reads and the network included). The bench waits on run
// events, so its own reads are one pass at the end, outside the window.
type RedisCost struct {
	USPerRun       float64 `json:"us_per_run"`
	ScriptUSPerRun float64 `json:"script_us_per_run"`
	DirectUSPerRun float64 `json:"direct_us_per_run"`
	CPUUSPerRun    float64 `json:"server_cpu_us_per_run"`
	CommandsPerRun float64 `json:"commands_per_run"`
	// Commands is every command name this process's engine, workers and
	// clients sent, per run ("script NAME" for the engine's scripts).
	Commands map[string]float64 `json:"commands"`
	// Scripts is each script's Redis time per run (bench --script-times:
	// sampled from SLOWLOG at threshold 0), the most costly first.
	Scripts []ScriptCost `json:"scripts,omitempty"`
}

// ScriptCost is one script's share of a run's Redis time.
type ScriptCost struct {
	Name        string  `json:"name"`
	CallsPerRun float64 `json:"calls_per_run"`
	// USPerRun is the script's share of the runs' script time
	// (RedisCost.ScriptUSPerRun), in the proportions sampled; USPerCall
	// is that per call.
	USPerRun  float64 `json:"us_per_run"`
	USPerCall float64 `json:"us_per_call"`
	// SampledUSPerCall is the mean time per call with the SLOWLOG on
	// (its bookkeeping included).
	SampledUSPerCall float64 `json:"sampled_us_per_call"`
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// serverStats is what redisMeter reads at each end of the window.
type serverStats struct {
	cmds   map[string]cmdStat // by commandstats name: "evalsha", "client|setinfo", ...
	cpuSec float64
}

func readServerStats(ctx context.Context, rdb redis.UniversalClient) (serverStats, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("bench: INFO commandstats: %w", err)
	}
	out := serverStats{cmds: map[string]cmdStat{}}
	for _, l := range strings.Split(info, "\r\n") {
		if name, rest, ok := strings.Cut(l, ":"); ok {
			switch {
			case strings.HasPrefix(name, "cmdstat_"):
				var s cmdStat
				for _, kv := range strings.Split(rest, ",") {
					k, v, _ := strings.Cut(kv, "=")
					n, _ := strconv.ParseInt(v, 10, 64)
					switch k {
					case "calls":
						s.calls = n
					case "usec":
						s.usec = n
					}
				}
				out.cmds[strings.TrimPrefix(name, "cmdstat_")] = s
			case name == "used_cpu_sys" || name == "used_cpu_user":
				f, _ := strconv.ParseFloat(rest, 64)
				out.cpuSec += f
			}
		}
	}
	return out, nil
}

// redisMeter measures the window between start and stop.
type redisMeter struct {
	rdb     redis.UniversalClient // the bench's own connection (reads the stats)
	counter *rediscount.Counter   // hooked on the engine's, workers' and clients' connections
	before  serverStats
	times   *scriptTimes // nil without --script-times
}

func newRedisMeter(rdb redis.UniversalClient) *redisMeter {
	return &redisMeter{rdb: rdb, counter: rediscount.New(storage.ScriptName)}
}

func (m *redisMeter) start(ctx context.Context, scriptTimes bool) error {
	if scriptTimes {
		t, err := startScriptTimes(ctx, m.rdb)
		if err != nil {
			return err
		}
		m.times = t
	}
	m.counter.Reset()
	var err error
	m.before, err = readServerStats(ctx, m.rdb)
	return err
}

// stop ends the window and returns the cost of each of runs runs.
func (m *redisMeter) stop(ctx context.Context, runs int) (*RedisCost, error) {
	counts := m.counter.Counts()
	after, err := readServerStats(ctx, m.rdb)
	var perScript map[string]time.Duration
	if m.times != nil {
		perScript, err = m.times.stop(ctx)
		if err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	delta := func(name string) cmdStat {
		a, b := after.cmds[name], m.before.cmds[name]
		return cmdStat{calls: a.calls - b.calls, usec: a.usec - b.usec}
	}
	per := float64(max(runs, 1))
	c := &RedisCost{Commands: map[string]float64{}, CPUUSPerRun: (after.cpuSec - m.before.cpuSec) * 1e6 / per}
	scripts := delta("evalsha").usec + delta("eval").usec
	var direct float64
	for name, n := range counts {
		c.Commands[name] = float64(n) / per
		c.CommandsPerRun += float64(n) / per
		if strings.HasPrefix(name, "script ") || name == "EVALSHA" || name == "EVAL" {
			continue
		}
		// The commandstats of NAME (and its subcommands, NAME|SUB) count
		// the calls from inside scripts too: this process's calls get
		// their share of the time.
		var tot cmdStat
		low := strings.ToLower(name)
		for k := range after.cmds {
			if k == low || strings.HasPrefix(k, low+"|") {
				d := delta(k)
				tot.calls += d.calls
				tot.usec += d.usec
			}
		}
		if tot.calls > 0 {
			direct += float64(tot.usec) * float64(min(n, tot.calls)) / float64(tot.calls)
		}
	}
	c.ScriptUSPerRun = float64(scripts) / per
	c.DirectUSPerRun = direct / per
	c.USPerRun = c.ScriptUSPerRun + c.DirectUSPerRun
	// The sampled times include the SLOWLOG's own bookkeeping (an entry per
	// command a script calls, made while it runs): each script gets its
	// sampled share of the exact total (commandstats).
	var sampled float64
	for name, each := range perScript {
		calls := counts["script "+name]
		if name == "" {
			name, calls = "other scripts", counts["EVALSHA"]
		}
		us := float64(each.Nanoseconds()) / 1e3
		c.Scripts = append(c.Scripts, ScriptCost{Name: name, CallsPerRun: float64(calls) / per, SampledUSPerCall: us})
		sampled += us * float64(calls) / per
	}
	for i := range c.Scripts {
		sc := &c.Scripts[i]
		if sampled > 0 {
			sc.USPerRun = sc.SampledUSPerCall * sc.CallsPerRun / sampled * c.ScriptUSPerRun
		}
		if sc.CallsPerRun > 0 {
			sc.USPerCall = sc.USPerRun / sc.CallsPerRun
		}
	}
	slices.SortFunc(c.Scripts, func(a, b ScriptCost) int {
		if a.USPerRun != b.USPerRun {
			if a.USPerRun > b.USPerRun {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return c, nil
}

// scriptTimes samples each script's Redis time per call: every
// sampleEvery it turns the server's SLOWLOG on at threshold 0 for
// sampleFor, then reads what was logged (the top-level EVALSHA entries;
// the commands a script calls are logged too, with client ?:0, and
// skipped). A script's time per run is its mean per sampled call times its
// calls per run (the hook's count, exact). It changes server-wide settings
// (slowlog-log-slower-than, slowlog-max-len) and restores them; the reads
// cost Redis a little, so --script-times is a diagnostic.
type scriptTimes struct {
	rdb    redis.UniversalClient
	prev   map[string]string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	last  int64 // newest entry id read
	calls map[string]int64
	took  map[string]time.Duration
	err   error
}

const (
	sampleEvery = time.Second
	sampleFor   = 100 * time.Millisecond
	slowLogLen  = 1 << 16 // must hold what a sample logs
)

func startScriptTimes(ctx context.Context, rdb redis.UniversalClient) (*scriptTimes, error) {
	prev := map[string]string{}
	for _, k := range []string{"slowlog-log-slower-than", "slowlog-max-len"} {
		v, err := rdb.ConfigGet(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("bench: --script-times: %w", err)
		}
		prev[k] = v[k]
	}
	t := &scriptTimes{rdb: rdb, prev: prev, last: -1, calls: map[string]int64{}, took: map[string]time.Duration{},
		done: make(chan struct{})}
	if err := rdb.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(slowLogLen)).Err(); err != nil {
		return nil, fmt.Errorf("bench: --script-times: %w", err)
	}
	ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go t.loop(ctx)
	return t, nil
}

func (t *scriptTimes) restore(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for k, v := range t.prev {
		_ = t.rdb.ConfigSet(ctx, k, v).Err()
	}
}

func (t *scriptTimes) loop(ctx context.Context) {
	defer close(t.done)
	for {
		if err := t.sample(ctx); err != nil {
			if ctx.Err() == nil {
				t.mu.Lock()
				t.err = err
				t.mu.Unlock()
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(sampleEvery - sampleFor):
		}
	}
}

// sample logs every command for sampleFor and adds the scripts' entries.
func (t *scriptTimes) sample(ctx context.Context) error {
	if err := t.rdb.Do(ctx, "slowlog", "reset").Err(); err != nil {
		return fmt.Errorf("bench: --script-times: %w", err)
	}
	if err := t.rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		return fmt.Errorf("bench: --script-times: %w", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(sampleFor):
	}
	// Off again before reading (with the server's own threshold), so the
	// read is not itself logged; ctx may have ended: restore regardless.
	if err := t.rdb.ConfigSet(context.WithoutCancel(ctx), "slowlog-log-slower-than", t.prev["slowlog-log-slower-than"]).Err(); err != nil {
		return fmt.Errorf("bench: --script-times: %w", err)
	}
	logs, err := t.rdb.SlowLogGet(context.WithoutCancel(ctx), slowLogLen).Result()
	if err != nil {
		return fmt.Errorf("bench: --script-times: SLOWLOG GET: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range logs {
		if len(l.Args) > 1 && strings.EqualFold(l.Args[0], "evalsha") && l.ClientAddr != "?:0" {
			t.calls[l.Args[1]]++
			t.took[l.Args[1]] += l.Duration
		}
	}
	return nil
}

// stop ends the sampling, restores the settings and returns each script's
// mean time per call by name ("" for scripts that are not the engine's).
func (t *scriptTimes) stop(ctx context.Context) (map[string]time.Duration, error) {
	t.cancel()
	<-t.done
	t.restore(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return nil, t.err
	}
	calls, took := map[string]int64{}, map[string]time.Duration{}
	for sha, n := range t.calls {
		name := storage.ScriptName(sha)
		calls[name] += n
		took[name] += t.took[sha]
	}
	out := map[string]time.Duration{}
	for name, n := range calls {
		out[name] = took[name] / time.Duration(n)
	}
	return out, nil
}
