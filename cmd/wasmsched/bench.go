package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, benchCommand())
}

// benchOptions are the parsed flags of `bench`.
type benchOptions struct {
	Namespace    string // "" = bench-<unix nanos>, deleted afterwards
	Groups       int
	Policy       string // of the generated groups; "" = wait
	Window       int    // of the generated groups; 0 = storage.DefaultWindow
	Runs         int
	Workers      int // 0 = use the workers already running in the namespace
	Slots        int
	Hosts        int // 0 = use the leader already running in the namespace
	Duration     time.Duration
	Clients      int
	SubmitBatch  int
	Coordinators int
	Timeout      time.Duration
	HeartbeatTTL time.Duration
	LeaseTTL     time.Duration
	Keep         bool
	CPUProfile   string
	LogLevel     slog.Level
	SlowLog      bool
}

// benchResult is the json of `bench` (durations in milliseconds).
type benchResult struct {
	Namespace      string         `json:"namespace"`
	Groups         int            `json:"groups"`
	Policy         string         `json:"policy"`
	Window         int            `json:"window,omitempty"`
	Runs           int            `json:"runs"`
	Hosts          int            `json:"hosts"`
	Workers        int            `json:"workers"`
	SlotsPerWorker int            `json:"slots_per_worker"`
	RunDurationMS  float64        `json:"run_duration_ms"`
	Clients        int            `json:"clients"`
	SubmitBatch    int            `json:"submit_batch"`
	SubmitSeconds  float64        `json:"submit_seconds"`
	SubmitsPerSec  float64        `json:"submits_per_sec"`
	LaunchSeconds  float64        `json:"launch_seconds"`
	LaunchesPerSec float64        `json:"launches_per_sec"`
	FinishSeconds  float64        `json:"finish_seconds"`
	FinishesPerSec float64        `json:"finishes_per_sec"`
	SubmitToLaunch latencyJSON    `json:"submit_to_launched_ms"`
	LaunchToRun    latencyJSON    `json:"launched_to_running_ms"`
	SubmitToRun    latencyJSON    `json:"submit_to_running_ms"`
	SubmitToFinal  latencyJSON    `json:"submit_to_final_ms"`
	States         map[string]int `json:"states"`
	CleanedUp      bool           `json:"cleaned_up"`
	// SlowestMS is the slowest Redis command during the run (--slowlog),
	// in ms, and SlowCommands the slowest ones (at most 8).
	SlowLog      bool     `json:"slowlog,omitempty"`
	SlowestMS    float64  `json:"slowest_command_ms,omitempty"`
	SlowCommands []string `json:"slow_commands,omitempty"`
}

type latencyJSON struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "end-to-end load harness: submit zero-duration simulated runs over many groups, measure launches/s and latency",
		Description: `Starts, in this process, --hosts hosts (the same runtime as "serve") and
--workers simulated workers with --slots slots each, against --redis; submits
--runs runs (default 10 per group) spread round-robin over --groups groups
(policy wait, max_active 1: created by the first submit) from --clients
concurrent clients, --submit-batch runs per pipelined round trip
(storage.SubmitBatch), as fast as it can; waits until every run is final; and
prints:

   submits/s    runs / time to submit them all (the harness's load
                generator, not the engine)
   launches/s   runs made RUNNING by the engine / (last run RUNNING -
                first submit), Redis time
   finishes/s   runs / (last run final - first submit), Redis time
   latency      submit -> RUNNING and submit -> final, p50/p90/p99/max,
                from the runs' own Redis timestamps (ms resolution); it
                includes the wait behind earlier runs of the same group.

Before the clock starts, one warm-up run goes through a group "warmup" of
the same policy (the hosts load and compile the policy on first use).
--policy and --window set the generated groups' settings; --slowlog reports
the slowest Redis commands of the run (it sets the server's
slowlog-log-slower-than to 1 ms and resets its SLOWLOG; the threshold is
restored afterwards).

Namespace: by default a fresh one, bench-<unix nanos>, deleted afterwards
(--keep keeps it; it can then be deleted with
   redis-cli --scan --pattern 'ws:{NS}:*' | xargs redis-cli unlink).
With an explicit --namespace the keys are kept. --workers 0 and --hosts 0
use the workers / leader already running in that namespace (start them with
"wasmsched worker --simulate" and "wasmsched serve").

Everything is bounded by --timeout (exit 1 with the partial figures).
--cpuprofile writes a CPU profile of this process (hosts + workers +
clients) for "go tool pprof".

Examples:
   wasmsched bench --redis redis://127.0.0.1:6379/0
   wasmsched bench --groups 1000 --runs 20000 --workers 4 --slots 128 -o json
   wasmsched -n prod-like bench --workers 0 --hosts 0 --runs 5000`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "groups", Value: 1000, Usage: "spread the runs over `N` groups"},
			&cli.StringFlag{Name: "policy", Value: "wait", Usage: "serial policy `NAME` of the generated groups (wait, discard, priority, or one pushed in --namespace)"},
			&cli.IntFlag{Name: "window", Usage: "snapshot window `N` of the generated groups (group set --window)", DefaultText: fmt.Sprint(storage.DefaultWindow)},
			&cli.IntFlag{Name: "runs", Usage: "submit `N` runs", DefaultText: "10 x --groups"},
			&cli.IntFlag{Name: "workers", Value: 4, Usage: "in-process simulated workers `W` (0 = use the running ones)"},
			&cli.IntFlag{Name: "slots", Value: 128, Usage: "slots `S` per in-process worker"},
			&cli.IntFlag{Name: "hosts", Value: 1, Usage: "in-process hosts `H` (0 = use the running leader)"},
			&cli.DurationFlag{Name: "duration", Value: 0, Usage: "simulated run duration `D`"},
			&cli.IntFlag{Name: "clients", Value: 16, Usage: "concurrent submitting clients `C`"},
			&cli.IntFlag{Name: "submit-batch", Value: 32, Usage: "each client submits `N` runs per pipelined round trip (storage.SubmitBatch; the harness's load generator, not the engine: 1 = one Submit per run)"},
			&cli.IntFlag{Name: "coordinators", Usage: "groups decided concurrently by the in-process hosts `N` (0 = the host default)", DefaultText: "the host default"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "give up after `D`"},
			&cli.DurationFlag{Name: "heartbeat-ttl", Value: 150 * time.Millisecond, Usage: "heartbeat TTL `D` of the in-process workers (they heartbeat every D/3; new runs are picked up at once via slot-events)"},
			&cli.DurationFlag{Name: "lease-ttl", Value: host.DefaultLeaseTTL, Usage: "leader lease TTL `D` of the in-process hosts"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the generated namespace's keys"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile to `FILE`"},
			&cli.BoolFlag{Name: "slowlog", Usage: "report the slowest Redis commands of the run (sets the server's slowlog-log-slower-than to 1ms and resets its SLOWLOG; restored afterwards)"},
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "log `LEVEL` of the in-process hosts and workers"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usageErrorf("bench: unexpected arguments %q", c.Args().Slice())
			}
			o := benchOptions{
				Groups:       c.Int("groups"),
				Policy:       c.String("policy"),
				Window:       c.Int("window"),
				SlowLog:      c.Bool("slowlog"),
				Runs:         c.Int("runs"),
				Workers:      c.Int("workers"),
				Slots:        c.Int("slots"),
				Hosts:        c.Int("hosts"),
				Duration:     c.Duration("duration"),
				Clients:      c.Int("clients"),
				SubmitBatch:  c.Int("submit-batch"),
				Coordinators: c.Int("coordinators"),
				Timeout:      c.Duration("timeout"),
				HeartbeatTTL: c.Duration("heartbeat-ttl"),
				LeaseTTL:     c.Duration("lease-ttl"),
				Keep:         c.Bool("keep"),
				CPUProfile:   c.String("cpuprofile"),
			}
			if err := o.LogLevel.UnmarshalText([]byte(c.String("log-level"))); err != nil {
				return usageErrorf("bench: --log-level %q: want debug, info, warn or error", c.String("log-level"))
			}
			if globalIsSet(c, flagNamespace) {
				o.Namespace = globalString(c, flagNamespace)
			}
			if err := o.check(); err != nil {
				return err
			}
			if _, err := outputFormat(c); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: o.LogLevel}))
			res, err := runBench(c.Context, globalString(c, flagRedis), o, c.App.ErrWriter, log)
			if res != nil {
				if rerr := render(c, res, func(w io.Writer) { benchTable(w, res) }); rerr != nil && err == nil {
					err = rerr
				}
			}
			return err
		},
	}
}

// globalIsSet reports whether a global flag was given (on any level of the
// command line, or by its environment variable).
func globalIsSet(c *cli.Context, name string) bool {
	for _, ctx := range c.Lineage() {
		if ctx.Command == nil && ctx.App == nil {
			continue
		}
		if ctx.IsSet(name) {
			return true
		}
	}
	return false
}

func (o *benchOptions) check() error {
	switch {
	case o.Groups < 1:
		return usageErrorf("bench: --groups must be >= 1, got %d", o.Groups)
	case o.Window < 0 || o.Window > storage.MaxWindow:
		return usageErrorf("bench: --window must be 1 to %d, got %d", storage.MaxWindow, o.Window)
	case o.Runs < 0:
		return usageErrorf("bench: --runs must be >= 0, got %d", o.Runs)
	case o.Workers < 0:
		return usageErrorf("bench: --workers must be >= 0, got %d", o.Workers)
	case o.Slots < 1:
		return usageErrorf("bench: --slots must be >= 1, got %d", o.Slots)
	case o.Hosts < 0:
		return usageErrorf("bench: --hosts must be >= 0, got %d", o.Hosts)
	case o.Duration < 0:
		return usageErrorf("bench: --duration must not be negative, got %v", o.Duration)
	case o.Clients < 1:
		return usageErrorf("bench: --clients must be >= 1, got %d", o.Clients)
	case o.SubmitBatch < 0:
		return usageErrorf("bench: --submit-batch must be >= 1, got %d", o.SubmitBatch)
	case o.Timeout <= 0:
		return usageErrorf("bench: --timeout must be positive, got %v", o.Timeout)
	case o.HeartbeatTTL < 30*time.Millisecond:
		return usageErrorf("bench: --heartbeat-ttl must be >= 30ms, got %v", o.HeartbeatTTL)
	case o.LeaseTTL < host.MinLeaseTTL:
		return usageErrorf("bench: --lease-ttl must be >= %v, got %v", host.MinLeaseTTL, o.LeaseTTL)
	}
	if err := storage.ValidateName("policy", o.Policy); err != nil {
		return usageErrorf("bench: --policy: %v", err)
	}
	if k, ok := plugins.Kind(o.Policy); ok && k != abi.KindSerial {
		return usageErrorf("bench: --policy %s is a %s policy; groups need a serial one (wait, discard, priority)", o.Policy, k)
	} else if !ok && o.Namespace == "" {
		return usageErrorf("bench: --policy %s is not a built-in: a pushed policy needs the --namespace it is pushed in", o.Policy)
	}
	if o.Runs == 0 {
		o.Runs = 10 * o.Groups
	}
	if o.SubmitBatch == 0 {
		o.SubmitBatch = 1
	}
	if o.Namespace != "" {
		if err := storage.ValidateName("namespace", o.Namespace); err != nil {
			return asUsage(err)
		}
	}
	return nil
}

// runBench runs the harness. It returns the (possibly partial) result
// unless nothing was measured.
func runBench(ctx context.Context, url string, o benchOptions, errw io.Writer, log *slog.Logger) (*benchResult, error) {
	generated := o.Namespace == ""
	if generated {
		o.Namespace = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	// Separate clients per role, so the submitters' bursts do not queue
	// the leader's or the workers' commands behind them in one pool.
	connect := func() (*storage.Store, func(), error) {
		rdb, err := storage.Connect(ctx, url)
		if err != nil {
			return nil, nil, err
		}
		st, err := storage.New(rdb, o.Namespace)
		if err != nil {
			rdb.Close()
			return nil, nil, asUsage(err)
		}
		if err := st.Load(ctx); err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return st, func() { rdb.Close() }, nil
	}
	st, closeSt, err := connect()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer closeSt()
	fmt.Fprintf(errw, "bench: namespace %s on %s\n", o.Namespace, url)
	cleaned := false
	if generated && !o.Keep {
		defer func() {
			if !cleaned {
				_, _ = deleteNamespace(context.WithoutCancel(ctx), st)
			}
		}()
	}

	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return nil, asUsage(fmt.Errorf("bench: --cpuprofile: %w", err))
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	// Start the in-process hosts and workers.
	runCtx, stopRuntime := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var closers []func() // run after the hosts and workers stopped
	defer func() {
		stopRuntime()
		wg.Wait()
		for _, f := range slices.Backward(closers) {
			f()
		}
	}()
	for i := range o.Hosts {
		hst, closeH, err := connect()
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		closers = append(closers, closeH)
		h, closeRT, err := newRuntimeHost(ctx, runtimeHostConfig{
			Store: hst, Advertise: fmt.Sprintf("bench-host-%d", i), LeaseTTL: o.LeaseTTL,
			Logger:  log.With("component", "host", "host", i),
			Runtime: host.EngineConfig{Coordinators: o.Coordinators},
		})
		if err != nil {
			return nil, err
		}
		closers = append(closers, closeRT)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Run(runCtx); err != nil {
				log.Error("bench: host stopped", "err", err)
			}
		}()
	}
	if o.Workers > 0 {
		wst, closeW, err := connect()
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		closers = append(closers, closeW)
		for i := range o.Workers {
			w := &worker.Agent{Store: wst, Advertise: fmt.Sprintf("bench-worker-%d", i), Slots: o.Slots,
				HeartbeatTTL: o.HeartbeatTTL, Logger: log.With("component", "worker", "worker", i)}
			if err := w.Validate(); err != nil {
				return nil, asUsage(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.Run(runCtx); err != nil && runCtx.Err() == nil {
					log.Error("bench: worker stopped", "err", err)
				}
			}()
		}
	}
	if err := benchWaitReady(ctx, st, o); err != nil {
		return nil, err
	}
	if o.Policy != "wait" || o.Window != 0 {
		if _, err := checkGroupPolicy(ctx, st, o.Policy, false); err != nil {
			return nil, usageErrorf("bench: --policy %s: a built-in serial policy (wait, discard, priority), or one pushed in the --namespace given", o.Policy)
		}
		for i := range o.Groups {
			if _, err := st.SetGroupSettings(ctx, fmt.Sprintf("g%05d", i), storage.GroupSettings{Policy: o.Policy, Window: o.Window}); err != nil {
				return nil, fmt.Errorf("bench: group settings: %w", err)
			}
		}
	}

	// Warm up: one run through a group of the same policy, so the figures
	// measure the engine at work, not the hosts' first load (compilation)
	// of the policy.
	warm := time.Now()
	if err := benchWarmUp(ctx, st, o.Policy); err != nil {
		return nil, err
	}
	fmt.Fprintf(errw, "bench: warm-up run done in %v\n", time.Since(warm).Round(time.Millisecond))

	var readSlow func(context.Context) ([]storage.SlowCommand, error)
	if o.SlowLog {
		if readSlow, err = st.WatchSlowLog(ctx, time.Millisecond); err != nil {
			return nil, fmt.Errorf("bench: --slowlog: %w", err)
		}
	}

	// Submit.
	sst, closeS, err := connect()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer closeS()
	ids := make([]string, o.Runs)
	var next atomic.Int64
	var submitErr error
	var errOnce sync.Once
	t0 := time.Now()
	var swg sync.WaitGroup
	for range o.Clients {
		swg.Add(1)
		go func() {
			defer swg.Done()
			batch := make([]storage.SubmitRequest, 0, o.SubmitBatch)
			for {
				lo := int(next.Add(int64(o.SubmitBatch))) - o.SubmitBatch
				if lo >= o.Runs || ctx.Err() != nil {
					return
				}
				batch = batch[:0]
				for i := lo; i < min(lo+o.SubmitBatch, o.Runs); i++ {
					batch = append(batch, storage.SubmitRequest{
						Group:    fmt.Sprintf("g%05d", i%o.Groups),
						ID:       fmt.Sprintf("r%07d", i),
						Duration: o.Duration,
					})
				}
				for j, r := range sst.SubmitBatch(ctx, batch) {
					if r.Err != nil {
						errOnce.Do(func() { submitErr = r.Err; cancel() })
						return
					}
					ids[lo+j] = r.Run.ID
				}
			}
		}()
	}
	swg.Wait()
	submitTook := time.Since(t0)
	if submitErr != nil {
		return nil, fmt.Errorf("bench: submit: %w", submitErr)
	}
	fmt.Fprintf(errw, "bench: submitted %d runs in %v; waiting for them to finish\n", o.Runs, submitTook.Round(time.Millisecond))

	recs, waitErr := benchWaitFinal(ctx, st, ids, o.Groups, errw)
	res := benchSummarize(o, recs, submitTook)
	if readSlow != nil {
		slow, err := readSlow(context.WithoutCancel(ctx))
		if err != nil {
			fmt.Fprintf(errw, "bench: %v\n", err)
		}
		res.SlowLog = err == nil
		slices.SortFunc(slow, func(a, b storage.SlowCommand) int { return int(b.Took - a.Took) })
		for i, c := range slow {
			if i == 0 {
				res.SlowestMS = float64(c.Took.Microseconds()) / 1e3
			}
			if i < 8 {
				res.SlowCommands = append(res.SlowCommands, fmt.Sprintf("%.2fms %s", float64(c.Took.Microseconds())/1e3, c.Args))
			}
		}
	}
	stopRuntime()
	wg.Wait()
	if generated && !o.Keep {
		if _, err := deleteNamespace(context.WithoutCancel(ctx), st); err != nil {
			fmt.Fprintf(errw, "bench: cleaning up namespace %s: %v\n", o.Namespace, err)
		} else {
			cleaned = true
		}
	}
	res.CleanedUp = cleaned
	if waitErr != nil {
		return res, fmt.Errorf("bench: %w (partial figures above)", waitErr)
	}
	return res, nil
}

// benchWarmUp submits one run to group "warmup" (policy policy) and waits
// until it is final.
func benchWarmUp(ctx context.Context, st *storage.Store, policy string) error {
	if _, err := st.SetGroup(ctx, "warmup", policy, 0); err != nil {
		return fmt.Errorf("bench: warm-up group: %w", err)
	}
	r, err := st.Submit(ctx, storage.SubmitRequest{Group: "warmup"})
	if err != nil {
		return fmt.Errorf("bench: warm-up run: %w", err)
	}
	for {
		got, err := st.GetRun(ctx, r.ID)
		if err == nil && got.State.Final() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: the warm-up run %s did not finish before the timeout", r.ID)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// benchWaitReady waits for a leader and for the workers' slots.
func benchWaitReady(ctx context.Context, st *storage.Store, o benchOptions) error {
	want := o.Workers
	if want == 0 {
		want = 1
	}
	for {
		li, err := st.Leader(ctx)
		if err == nil && li.Identity != "" {
			sv, err := st.Slots(ctx)
			alive := 0
			if err == nil {
				for _, w := range sv.Workers {
					if w.Alive {
						alive++
					}
				}
			}
			if alive >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: no leader and %d live worker(s) in namespace %s before the timeout", want, o.Namespace)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// benchRec is what bench reads back of a run.
type benchRec struct {
	state                                  string
	submitted, started, finished, launched int64 // unix ms (Redis TIME)
}

// readRuns reads the runs ids (storage.GetRuns, pipelined in chunks); a
// run that is gone reads as state "".
func readRuns(ctx context.Context, st *storage.Store, ids []string) ([]benchRec, error) {
	out := make([]benchRec, len(ids))
	const chunk = 1000
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	for lo := 0; lo < len(ids); lo += chunk {
		hi := min(lo+chunk, len(ids))
		runs, err := st.GetRuns(ctx, ids[lo:hi])
		if err != nil {
			return nil, err
		}
		byID := make(map[string]*storage.Run, len(runs))
		for i := range runs {
			byID[runs[i].ID] = &runs[i]
		}
		for i := lo; i < hi; i++ {
			if r := byID[ids[i]]; r != nil {
				out[i] = benchRec{state: string(r.State), submitted: ms(r.SubmittedAt), launched: ms(r.LaunchedAt),
					started: ms(r.StartedAt), finished: ms(r.FinishedAt)}
			}
		}
	}
	return out, nil
}

// benchWaitFinal waits until every run is final. It polls only the newest
// run of each group (the policy is wait: a group's runs launch in seq order)
// until those are final, then reads every run and keeps polling the
// unfinished ones.
func benchWaitFinal(ctx context.Context, st *storage.Store, ids []string, groups int, errw io.Writer) ([]benchRec, error) {
	var last []string
	for i := max(0, len(ids)-groups); i < len(ids); i++ {
		last = append(last, ids[i])
	}
	report := time.Now()
	// Poll the newest run of each group until all are final, dropping the
	// final ones from the poll (polling is load on the Redis being measured).
	for len(last) > 0 {
		recs, err := readRuns(ctx, st, last)
		if err == nil {
			open := last[:0]
			for i, r := range recs {
				if !storage.State(r.state).Final() {
					open = append(open, last[i])
				}
			}
			last = open
			if len(last) == 0 {
				break
			}
		}
		if time.Since(report) > 5*time.Second {
			report = time.Now()
			fmt.Fprintf(errw, "bench: %d groups not done yet\n", len(last))
		}
		select {
		case <-ctx.Done():
			recs, _ := readRuns(context.WithoutCancel(ctx), st, ids)
			return recs, fmt.Errorf("timed out with %d groups not done", len(last))
		case <-time.After(100 * time.Millisecond):
		}
	}
	for {
		recs, err := readRuns(ctx, st, ids)
		if err == nil {
			done := 0
			for _, r := range recs {
				if storage.State(r.state).Final() {
					done++
				}
			}
			if done == len(ids) {
				return recs, nil
			}
		}
		select {
		case <-ctx.Done():
			recs, _ := readRuns(context.WithoutCancel(ctx), st, ids)
			return recs, errors.New("timed out waiting for the last runs")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func benchSummarize(o benchOptions, recs []benchRec, submitTook time.Duration) *benchResult {
	res := &benchResult{
		Namespace: o.Namespace, Groups: o.Groups, Policy: o.Policy, Window: o.Window, Runs: o.Runs, Hosts: o.Hosts, Workers: o.Workers,
		SlotsPerWorker: o.Slots, RunDurationMS: float64(o.Duration) / 1e6, Clients: o.Clients,
		SubmitBatch: o.SubmitBatch, SubmitSeconds: submitTook.Seconds(), States: map[string]int{},
	}
	if submitTook > 0 {
		res.SubmitsPerSec = float64(o.Runs) / submitTook.Seconds()
	}
	var first, lastStart, lastFinal int64
	var toRun, toFinal, toLaunch, launchToRun []float64
	for _, r := range recs {
		st := r.state
		if st == "" {
			st = "MISSING"
		}
		res.States[st]++
		if r.submitted > 0 && (first == 0 || r.submitted < first) {
			first = r.submitted
		}
		if r.launched > 0 {
			toLaunch = append(toLaunch, float64(r.launched-r.submitted))
			if r.started > 0 {
				launchToRun = append(launchToRun, float64(r.started-r.launched))
			}
		}
		if r.started > 0 {
			lastStart = max(lastStart, r.started)
			toRun = append(toRun, float64(r.started-r.submitted))
		}
		if r.finished > 0 && storage.State(r.state).Final() {
			lastFinal = max(lastFinal, r.finished)
			toFinal = append(toFinal, float64(r.finished-r.submitted))
		}
	}
	if lastStart > first {
		res.LaunchSeconds = float64(lastStart-first) / 1e3
		res.LaunchesPerSec = float64(len(toRun)) / res.LaunchSeconds
	}
	if lastFinal > first {
		res.FinishSeconds = float64(lastFinal-first) / 1e3
		res.FinishesPerSec = float64(len(toFinal)) / res.FinishSeconds
	}
	res.SubmitToLaunch = percentiles(toLaunch)
	res.LaunchToRun = percentiles(launchToRun)
	res.SubmitToRun = percentiles(toRun)
	res.SubmitToFinal = percentiles(toFinal)
	return res
}

func percentiles(v []float64) latencyJSON {
	if len(v) == 0 {
		return latencyJSON{}
	}
	slices.Sort(v)
	at := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return latencyJSON{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: v[len(v)-1]}
}

func benchTable(w io.Writer, r *benchResult) {
	fmt.Fprintf(w, "namespace\t%s\n", r.Namespace)
	fmt.Fprintf(w, "setup\t%d runs over %d groups (policy %s); %d host(s); %d worker(s) x %d slots; run duration %gms; %d clients x %d runs per pipelined submit\n",
		r.Runs, r.Groups, r.Policy, r.Hosts, r.Workers, r.SlotsPerWorker, r.RunDurationMS, r.Clients, r.SubmitBatch)
	fmt.Fprintf(w, "submits/s\t%.0f\t(%.2fs; the harness's load generator, not the engine)\n", r.SubmitsPerSec, r.SubmitSeconds)
	fmt.Fprintf(w, "launches/s\t%.0f\t(%.2fs from first submit to last RUNNING: runs made RUNNING by the engine)\n", r.LaunchesPerSec, r.LaunchSeconds)
	fmt.Fprintf(w, "finishes/s\t%.0f\t(%.2fs from first submit to last final)\n", r.FinishesPerSec, r.FinishSeconds)
	fmt.Fprintf(w, "submit->LAUNCHED ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\t(coordinator)\n", r.SubmitToLaunch.P50, r.SubmitToLaunch.P90, r.SubmitToLaunch.P99, r.SubmitToLaunch.Max)
	fmt.Fprintf(w, "LAUNCHED->RUNNING ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\t(slot manager)\n", r.LaunchToRun.P50, r.LaunchToRun.P90, r.LaunchToRun.P99, r.LaunchToRun.Max)
	fmt.Fprintf(w, "submit->RUNNING ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\n", r.SubmitToRun.P50, r.SubmitToRun.P90, r.SubmitToRun.P99, r.SubmitToRun.Max)
	fmt.Fprintf(w, "submit->final ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\n", r.SubmitToFinal.P50, r.SubmitToFinal.P90, r.SubmitToFinal.P99, r.SubmitToFinal.Max)
	states := make([]string, 0, len(r.States))
	for s := range r.States {
		states = append(states, s)
	}
	slices.Sort(states)
	for _, s := range states {
		fmt.Fprintf(w, "state %s\t%d\n", s, r.States[s])
	}
	if r.SlowLog && len(r.SlowCommands) == 0 {
		fmt.Fprintf(w, "slowest Redis command\tnone over 1 ms\n")
	}
	if len(r.SlowCommands) > 0 {
		fmt.Fprintf(w, "slowest Redis command\t%.2f ms\n", r.SlowestMS)
		for _, c := range r.SlowCommands {
			fmt.Fprintf(w, "\t%s\n", c)
		}
	}
	fmt.Fprintf(w, "cleaned up\t%t\n", r.CleanedUp)
}

// deleteNamespace unlinks every key of st's namespace (ws:{NS}:*) and
// returns how many it removed.
func deleteNamespace(ctx context.Context, st *storage.Store) (int, error) {
	return st.DeleteNamespace(ctx)
}
