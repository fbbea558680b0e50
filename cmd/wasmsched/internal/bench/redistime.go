package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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

// redisMeter measures the window between start and stop.
type redisMeter struct {
	st      *storage.Store      // the bench's own connection (reads the stats)
	counter *rediscount.Counter // hooked on the engine's, workers' and clients' connections
	before  storage.ServerStats
	times   *scriptTimes // nil without --script-times
}

func newRedisMeter(st *storage.Store) *redisMeter {
	return &redisMeter{st: st, counter: rediscount.New(storage.ScriptName)}
}

func (m *redisMeter) start(ctx context.Context, scriptTimes bool) error {
	m.counter.Reset()
	var err error
	if m.before, err = m.st.ServerStats(ctx); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if scriptTimes {
		if m.times, err = startScriptTimes(ctx, m.st); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the window and returns the cost of each of runs runs.
func (m *redisMeter) stop(ctx context.Context, runs int) (*RedisCost, error) {
	counts := m.counter.Counts()
	var perScript map[string]time.Duration
	if m.times != nil {
		var err error
		if perScript, err = m.times.stop(); err != nil {
			return nil, err
		}
	}
	after, err := m.st.ServerStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	delta := func(name string) storage.CommandStat {
		a, b := after.Commands[name], m.before.Commands[name]
		return storage.CommandStat{Calls: a.Calls - b.Calls, Usec: a.Usec - b.Usec}
	}
	per := float64(max(runs, 1))
	c := &RedisCost{Commands: map[string]float64{}, CPUUSPerRun: (after.CPUSeconds - m.before.CPUSeconds) * 1e6 / per}
	scripts := delta("evalsha").Usec + delta("eval").Usec
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
		var tot storage.CommandStat
		low := strings.ToLower(name)
		for k := range after.Commands {
			if k == low || strings.HasPrefix(k, low+"|") {
				d := delta(k)
				tot.Calls += d.Calls
				tot.Usec += d.Usec
			}
		}
		if tot.Calls > 0 {
			direct += float64(tot.Usec) * float64(min(n, tot.Calls)) / float64(tot.Calls)
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
// sampleEvery it logs every command for sampleFor (storage.SampleScripts).
// A script's time per run is its mean per sampled call times its calls
// per run (the hook's count, exact). The samples cost Redis a little, so
// --script-times is a diagnostic.
type scriptTimes struct {
	st     *storage.Store
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	sum map[string]storage.ScriptSample
	err error
}

const (
	sampleEvery = time.Second
	sampleFor   = 100 * time.Millisecond
)

// startScriptTimes opens the first window before it returns (the first
// runs are sampled too).
func startScriptTimes(ctx context.Context, st *storage.Store) (*scriptTimes, error) {
	t := &scriptTimes{st: st, sum: map[string]storage.ScriptSample{}, done: make(chan struct{})}
	stop, err := st.SampleScripts(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: --script-times: %w", err)
	}
	ctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go t.loop(ctx, stop)
	return t, nil
}

func (t *scriptTimes) loop(ctx context.Context, stop func(context.Context) (map[string]storage.ScriptSample, error)) {
	defer close(t.done)
	for {
		select {
		case <-ctx.Done():
		case <-time.After(sampleFor):
		}
		got, err := stop(ctx)
		t.mu.Lock()
		if err == nil {
			for name, x := range got {
				y := t.sum[name]
				y.Calls += x.Calls
				y.Took += x.Took
				t.sum[name] = y
			}
		} else if t.err == nil {
			t.err = fmt.Errorf("bench: --script-times: %w", err)
		}
		t.mu.Unlock()
		if err != nil || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(sampleEvery - sampleFor):
		}
		if stop, err = t.st.SampleScripts(ctx); err != nil {
			if ctx.Err() == nil {
				t.mu.Lock()
				t.err = fmt.Errorf("bench: --script-times: %w", err)
				t.mu.Unlock()
			}
			return
		}
	}
}

// stop ends the sampling and returns each script's mean time per call by
// name ("" for scripts that are not the engine's).
func (t *scriptTimes) stop() (map[string]time.Duration, error) {
	t.cancel()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return nil, t.err
	}
	out := map[string]time.Duration{}
	for name, x := range t.sum {
		if x.Calls > 0 {
			out[name] = x.Took / time.Duration(x.Calls)
		}
	}
	return out, nil
}
