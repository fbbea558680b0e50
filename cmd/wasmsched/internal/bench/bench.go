// Package bench is `wasmsched bench`: an end-to-end load harness that
// starts hosts and simulated workers in this process (through the same
// public API `serve` and `worker` use), submits zero-work runs over many
// groups from concurrent clients, and measures launches/s, latency and the
// Redis time each run costs.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

// Options are the harness's settings (the CLI's flags).
type Options struct {
	Namespace    string // "" = bench-<unix nanos>, deleted afterwards
	Groups       int
	Policy       string // of the generated groups; "" = wait
	Window       int    // of the generated groups; 0 = limits.DefaultWindow
	Runs         int    // 0 = 10 x Groups
	Workers      int    // 0 = use the workers already running in the namespace
	Slots        int
	Hosts        int // 0 = use the leader already running in the namespace
	Duration     time.Duration
	Clients      int
	SubmitBatch  int // 0 = 1
	Coordinators int
	Timeout      time.Duration
	HeartbeatTTL time.Duration
	LeaseTTL     time.Duration
	Keep         bool
	CPUProfile   string
	SlowLog      bool
	ScriptTimes  bool // each script's Redis time (SLOWLOG at threshold 0, read while the runs go)
	// Delay (0 = none): every run is submitted with the same not_before,
	// the first whole second at least Delay after the first submit, so
	// all become due in the same second.
	Delay time.Duration
	// Require (nil = none): every generated group requires these labels,
	// and the in-process workers carry them (placement's cost).
	Require map[string]string
	// Prefer (nil = none): every generated group prefers these
	// ("key=value[:weight]"), and the in-process workers carry them.
	Prefer []string
	// Placement ("" = none): the namespace's placement (spread, pack or
	// policy: abi.ParamPlacement), set before the runs are submitted.
	Placement string
	// HTTPWorkers: the in-process workers go through the worker protocol
	// of an in-process API server instead of the worker library.
	HTTPWorkers bool
	// Trace: the in-process hosts, workers and clients trace every run
	// (an OpenTelemetry SDK exporting over OTLP/HTTP to a sink in this
	// process: traceSink), each run submitted in a trace of its own.
	Trace bool
}

// Check validates o and fills its defaults; errors are bad input.
func (o *Options) Check() error {
	switch {
	case o.Groups < 1:
		return badinput.Errorf("bench: --groups must be >= 1, got %d", o.Groups)
	case o.Window < 0 || o.Window > limits.MaxWindow:
		return badinput.Errorf("bench: --window must be 1 to %d, got %d", limits.MaxWindow, o.Window)
	case o.Runs < 0:
		return badinput.Errorf("bench: --runs must be >= 0, got %d", o.Runs)
	case o.Trace && o.HTTPWorkers:
		return badinput.Errorf("bench: --trace measures the worker library's spans; it does not go with --http-workers")
	case o.Workers < 0:
		return badinput.Errorf("bench: --workers must be >= 0, got %d", o.Workers)
	case o.Slots < 1:
		return badinput.Errorf("bench: --slots must be >= 1, got %d", o.Slots)
	case o.Hosts < 0:
		return badinput.Errorf("bench: --hosts must be >= 0, got %d", o.Hosts)
	case o.Duration < 0:
		return badinput.Errorf("bench: --duration must not be negative, got %v", o.Duration)
	case o.Clients < 1:
		return badinput.Errorf("bench: --clients must be >= 1, got %d", o.Clients)
	case o.SubmitBatch < 0:
		return badinput.Errorf("bench: --submit-batch must be >= 1, got %d", o.SubmitBatch)
	case o.Timeout <= 0:
		return badinput.Errorf("bench: --timeout must be positive, got %v", o.Timeout)
	case o.HeartbeatTTL < 30*time.Millisecond:
		return badinput.Errorf("bench: --heartbeat-ttl must be >= 30ms, got %v", o.HeartbeatTTL)
	case o.SlowLog && o.ScriptTimes:
		return badinput.Errorf("bench: --slowlog and --script-times both set the server's SLOWLOG: give one")
	case o.Delay < 0 || o.Delay > limits.MaxNotBefore:
		return badinput.Errorf("bench: --delay must be 0 to %v, got %v", limits.MaxNotBefore, o.Delay)
	case o.LeaseTTL < host.MinLeaseTTL:
		return badinput.Errorf("bench: --lease-ttl must be >= %v, got %v", host.MinLeaseTTL, o.LeaseTTL)
	}
	if o.Policy == "" {
		o.Policy = "wait"
	}
	if err := limits.ValidateName("policy", o.Policy); err != nil {
		return badinput.Errorf("bench: --policy: %v", err)
	}
	if o.Placement != "" {
		a := storage.AllocationSettings{Params: []abi.Label{{Key: abi.ParamPlacement, Value: o.Placement}}}
		if err := a.Validate(); err != nil {
			return badinput.Errorf("bench: --placement: %v", err)
		}
	}
	if bp, ok := plugins.Lookup(o.Policy); ok && bp.Kind != abi.KindSerial {
		return badinput.Errorf("bench: --policy %s is a %s policy; groups need a serial one (wait, discard, priority)", o.Policy, bp.Kind)
	} else if !ok && o.Namespace == "" {
		return badinput.Errorf("bench: --policy %s is not a built-in: a pushed policy needs the --namespace it is pushed in", o.Policy)
	}
	if o.Runs == 0 {
		o.Runs = 10 * o.Groups
	}
	if o.SubmitBatch == 0 {
		o.SubmitBatch = 1
	}
	if o.Namespace != "" {
		if err := limits.ValidateName("namespace", o.Namespace); err != nil {
			return badinput.Wrap(err)
		}
	}
	return nil
}

// Result is the harness's figures (durations in milliseconds).
type Result struct {
	Namespace      string `json:"namespace"`
	Groups         int    `json:"groups"`
	Policy         string `json:"policy"`
	Window         int    `json:"window,omitempty"`
	Runs           int    `json:"runs"`
	Hosts          int    `json:"hosts"`
	Workers        int    `json:"workers"`
	SlotsPerWorker int    `json:"slots_per_worker"`
	// Durable: the writes waited for a replica (the URL's durable=, auto
	// when the master has one; docs/operations.md "What survives what").
	Durable bool `json:"durable"`
	// ListpackValue: the server's hash-max-listpack-value (0: it did not
	// say); under storage.CompactRecordsValue every run's record is a
	// hashtable, which costs Redis more a run (docs/operations.md "Redis").
	ListpackValue  int            `json:"hash_max_listpack_value,omitempty"`
	RunDurationMS  float64        `json:"run_duration_ms"`
	Clients        int            `json:"clients"`
	SubmitBatch    int            `json:"submit_batch"`
	SubmitSeconds  float64        `json:"submit_seconds"`
	SubmitsPerSec  float64        `json:"submits_per_sec"`
	LaunchSeconds  float64        `json:"launch_seconds"`
	LaunchesPerSec float64        `json:"launches_per_sec"`
	FinishSeconds  float64        `json:"finish_seconds"`
	FinishesPerSec float64        `json:"finishes_per_sec"`
	SubmitToLaunch Latency        `json:"submit_to_launched_ms"`
	LaunchToRun    Latency        `json:"launched_to_running_ms"`
	SubmitToRun    Latency        `json:"submit_to_running_ms"`
	SubmitToFinal  Latency        `json:"submit_to_final_ms"`
	States         map[string]int `json:"states"`
	CleanedUp      bool           `json:"cleaned_up"`
	// SlowestMS is the slowest Redis command during the run (--slowlog),
	// in ms, and SlowCommands the slowest ones (at most 8).
	SlowLog      bool     `json:"slowlog,omitempty"`
	SlowestMS    float64  `json:"slowest_command_ms,omitempty"`
	SlowCommands []string `json:"slow_commands,omitempty"`
	// Redis is what each run cost Redis, from the first submit to the last
	// final run (nil if it could not be read).
	Redis *RedisCost `json:"redis,omitempty"`
	// With --delay: the not_before of every run; how long after it the
	// last run was RUNNING (and p50/p99/max of not_before -> RUNNING); the
	// commands the hosts, workers and clients sent per second while the
	// runs waited (from the end of the submits to 1 s before they were due).
	DueAt             *time.Time       `json:"due_at,omitempty"`
	DueToAllRunningMS float64          `json:"due_to_all_running_ms,omitempty"`
	DueToRunning      *Latency         `json:"due_to_running_ms,omitempty"`
	WaitCommandsPerS  *float64         `json:"wait_commands_per_sec,omitempty"`
	WaitCommands      map[string]int64 `json:"wait_commands,omitempty"`
	// ProcessCPUUSPerRun is this process's CPU time (the in-process hosts,
	// workers and clients: user + system) per run, from the first submit
	// to the last final run (and, with --trace, its spans exported).
	ProcessCPUUSPerRun float64 `json:"process_cpu_us_per_run"`
	// Trace is what --trace made (nil without it).
	Trace *TraceResult `json:"trace,omitempty"`
	// Engine is the in-process hosts' counters, summed ("decisions.applied",
	// "decisions.settled", "decisions.stale", "allocations.allocated", ...;
	// the warm-up run included).
	Engine map[string]int64 `json:"engine,omitempty"`
}

// counters sums the in-process hosts' runtime counters.
func (e *env) counters() map[string]int64 {
	out := map[string]int64{}
	for _, h := range e.hosts {
		if rs := h.Status().Runtime; rs != nil {
			for k, v := range rs.Counters {
				out[k] += v
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Latency is a distribution's percentiles, in ms.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// env is one harness run: its connections and what runs in the background.
type env struct {
	due    time.Time // the delayed runs' not_before (zero: none)
	o      Options
	url    string
	errw   io.Writer
	log    *slog.Logger
	st     *storage.Store // the harness's own reads
	meter  *redisMeter    // counts what the hosts, workers and clients send
	hosts  []*host.Host
	runCtx context.Context
	stop   context.CancelFunc
	trace  *traceSink // --trace (nil: off)
	wg     sync.WaitGroup
	closer []func() // run after the hosts and workers stopped, last first
}

// connect opens a connection of its own: the submitters' bursts must not
// queue the leader's or the workers' commands behind them in one pool.
// Every connection but the harness's own (the first) counts its commands
// (e.meter).
func (e *env) connect(ctx context.Context) (*storage.Store, error) {
	rdb, err := storage.Connect(ctx, e.url)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.meter != nil {
		e.meter.counter.Hook(rdb)
	}
	st, err := storage.New(rdb, e.o.Namespace)
	if err != nil {
		rdb.Close()
		return nil, badinput.Wrap(err)
	}
	if err := st.Load(ctx); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	e.closer = append(e.closer, func() { rdb.Close() })
	return st, nil
}

// shutdown stops the hosts and workers and closes every connection.
func (e *env) shutdown() {
	e.stop()
	e.wg.Wait()
	for _, f := range slices.Backward(e.closer) {
		f()
	}
	e.closer = nil
}

// Run runs the harness against the Redis at url. It returns the (possibly
// partial) result unless nothing was measured.
func Run(ctx context.Context, url string, o Options, errw io.Writer, log *slog.Logger) (*Result, error) {
	generated := o.Namespace == ""
	if generated {
		o.Namespace = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	e := &env{o: o, url: url, errw: errw, log: log}
	e.runCtx, e.stop = context.WithCancel(ctx)
	defer e.shutdown()
	var err error
	if e.st, err = e.connect(ctx); err != nil {
		return nil, err
	}
	e.meter = newRedisMeter(e.st)
	own := e.closer // the harness's own connection outlives the hosts and workers (the cleanup uses it)
	e.closer = nil
	defer func() {
		for _, f := range own {
			f()
		}
	}()
	fmt.Fprintf(errw, "bench: namespace %s on %s\n", o.Namespace, url)
	cleanup := generated && !o.Keep
	cleaned := false
	if cleanup {
		defer func() {
			if !cleaned {
				_, _ = e.st.DeleteNamespace(context.WithoutCancel(ctx))
			}
		}()
	}
	if o.CPUProfile != "" {
		stopProfile, err := startProfile(o.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer stopProfile()
	}
	if err := e.prepare(ctx); err != nil {
		return nil, err
	}
	var readSlow func(context.Context) ([]storage.SlowCommand, error)
	if o.SlowLog {
		if readSlow, err = e.st.WatchSlowLog(ctx, time.Millisecond); err != nil {
			return nil, fmt.Errorf("bench: --slowlog: %w", err)
		}
	}
	watch, err := e.st.WatchRuns(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer watch.Close()
	if err := e.meter.start(ctx, o.ScriptTimes); err != nil {
		return nil, err
	}
	if o.Delay > 0 {
		e.due = time.Now().Add(o.Delay).Truncate(time.Second).Add(time.Second)
	}
	cpu0 := cpuTime()
	ids, submitTook, err := e.submitAll(ctx, cancel)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(errw, "bench: submitted %d runs in %v; waiting for them to finish\n", o.Runs, submitTook.Round(time.Millisecond))
	var waitRate *float64
	var waitCounts map[string]int64
	if !e.due.IsZero() {
		waitRate, waitCounts = e.measureWait(ctx)
	}
	waitErr := waitFinal(ctx, e.st, watch, ids, errw)
	cost, costErr := e.meter.stop(ctx, o.Runs)
	e.trace.flush(ctx)
	cpu := cpuTime() - cpu0
	if costErr != nil {
		fmt.Fprintf(errw, "bench: %v\n", costErr)
	}
	res, err := e.result(context.WithoutCancel(ctx), ids, submitTook, cost, readSlow, waitRate, waitCounts)
	if err != nil {
		return nil, err
	}
	res.ProcessCPUUSPerRun = float64(cpu.Microseconds()) / float64(max(o.Runs, 1))
	res.Trace = e.trace.result(o.Runs)
	e.shutdown()
	if cleanup {
		if _, err := e.st.DeleteNamespace(context.WithoutCancel(ctx)); err != nil {
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

// result reads the runs back and assembles the figures of a bench.
func (e *env) result(ctx context.Context, ids []string, submitTook time.Duration, cost *RedisCost,
	readSlow func(context.Context) ([]storage.SlowCommand, error), waitRate *float64, waitCounts map[string]int64) (*Result, error) {
	recs, err := readRuns(ctx, e.st, ids)
	if err != nil {
		return nil, fmt.Errorf("bench: reading the runs: %w", err)
	}
	res := summarize(e.o, recs, submitTook)
	res.Durable = e.st.Durable(ctx)
	res.ListpackValue, _ = e.st.ListpackValue(ctx)
	if !e.due.IsZero() {
		res.addDue(e.due, recs)
		res.WaitCommandsPerS, res.WaitCommands = waitRate, waitCounts
	}
	res.Redis = cost
	res.Engine = e.counters()
	if readSlow != nil {
		res.addSlowLog(readSlow(ctx))
	}
	return res, nil
}

func startProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, badinput.Errorf("bench: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// prepare starts the hosts and workers, waits for a leader and the
// workers' slots, sets up the groups and sends one warm-up run through, so
// the figures measure the engine at work, not the hosts' first load
// (compilation) of the policy.
func (e *env) prepare(ctx context.Context) error {
	if e.o.Trace {
		s, err := startTraceSink(ctx)
		if err != nil {
			return err
		}
		e.trace = s
		e.closer = append(e.closer, s.close)
	}
	if err := e.startHosts(ctx); err != nil {
		return err
	}
	if err := e.startWorkers(ctx); err != nil {
		return err
	}
	if err := waitReady(ctx, e.st, e.o); err != nil {
		return err
	}
	if e.o.Policy != "wait" || e.o.Window != 0 || len(e.o.Prefer) > 0 {
		if err := host.CheckGroupPolicy(ctx, e.st, e.o.Policy); err != nil {
			return badinput.Errorf("bench: --policy: %w", err)
		}
		prefer, err := e.preferences()
		if err != nil {
			return err
		}
		for i := range e.o.Groups {
			if _, err := e.st.SetGroupSettings(ctx, groupName(i), storage.GroupSettings{Policy: e.o.Policy, Window: e.o.Window,
				Require: limits.LabelsFromMap(e.o.Require), Prefer: prefer}); err != nil {
				return fmt.Errorf("bench: group settings: %w", err)
			}
		}
	}
	if e.o.Placement != "" {
		if err := e.st.SetAllocation(ctx, storage.AllocationSettings{
			Params: []abi.Label{{Key: abi.ParamPlacement, Value: e.o.Placement}}}); err != nil {
			return badinput.Errorf("bench: --placement: %w", err)
		}
	}
	warm := time.Now()
	if err := warmUp(ctx, e.st, e.o.Policy); err != nil {
		return err
	}
	fmt.Fprintf(e.errw, "bench: warm-up run done in %v\n", time.Since(warm).Round(time.Millisecond))
	return nil
}

func groupName(i int) string { return fmt.Sprintf("g%05d", i) }

// startHosts runs o.Hosts hosts (the runtime of `serve`) in the background.
func (e *env) startHosts(ctx context.Context) error {
	for i := range e.o.Hosts {
		st, err := e.connect(ctx)
		if err != nil {
			return err
		}
		h, err := host.New(ctx, host.Config{Store: st, Advertise: fmt.Sprintf("bench-host-%d", i), LeaseTTL: e.o.LeaseTTL,
			Logger: e.log.With("component", "host", "host", i), Engine: host.EngineConfig{Coordinators: e.o.Coordinators,
				TracerProvider: e.tracerProvider()}})
		if err != nil {
			return badinput.Wrap(err)
		}
		e.hosts = append(e.hosts, h)
		e.closer = append(e.closer, func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = h.Close(cctx)
		})
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := h.Run(e.runCtx); err != nil {
				e.log.Error("bench: host stopped", "err", err)
			}
		}()
	}
	return nil
}

// preferences are o.Prefer parsed.
func (e *env) preferences() ([]abi.Preference, error) {
	var out []abi.Preference
	for _, s := range e.o.Prefer {
		p, err := limits.ParsePreference(s)
		if err != nil {
			return nil, badinput.Errorf("bench: --prefer: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// workerLabels are the labels the in-process workers carry: what the
// groups require and prefer.
func (e *env) workerLabels() map[string]string {
	if len(e.o.Require) == 0 && len(e.o.Prefer) == 0 {
		return nil
	}
	m := maps.Clone(e.o.Require)
	if m == nil {
		m = map[string]string{}
	}
	ps, _ := e.preferences()
	for _, p := range ps {
		m[p.Key] = p.Value
	}
	return m
}

// startWorkers runs o.Workers simulated workers in the background.
func (e *env) startWorkers(ctx context.Context) error {
	if e.o.Workers == 0 {
		return nil
	}
	st, err := e.connect(ctx)
	if err != nil {
		return err
	}
	if e.o.HTTPWorkers {
		url, err := e.startAPI(ctx, st)
		if err != nil {
			return err
		}
		for i := range e.o.Workers {
			if err := e.startHTTPWorker(e.runCtx, url, st.Namespace(), i, e.o.Slots); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range e.o.Workers {
		w, err := worker.New(ctx, worker.Config{Client: st.Redis(), Namespace: st.Namespace(), Advertise: fmt.Sprintf("bench-worker-%d", i),
			Slots: e.o.Slots, HeartbeatTTL: e.o.HeartbeatTTL, DrainTimeout: time.Nanosecond, Logger: e.log.With("component", "worker", "worker", i),
			Labels: e.workerLabels(), TracerProvider: e.tracerProvider()})
		if err != nil {
			return badinput.Wrap(err)
		}
		w.HandleDefault(worker.Simulate())
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := w.Run(e.runCtx); err != nil && e.runCtx.Err() == nil {
				e.log.Error("bench: worker stopped", "err", err)
			}
		}()
	}
	return nil
}

// submitAll submits o.Runs runs round-robin over the groups from o.Clients
// goroutines, o.SubmitBatch per pipelined round trip, on a connection of
// their own; the first error cancels the rest.
func (e *env) submitAll(ctx context.Context, cancel context.CancelFunc) ([]string, time.Duration, error) {
	o := e.o
	st, err := e.connect(ctx)
	if err != nil {
		return nil, 0, err
	}
	ids := make([]string, o.Runs)
	var (
		next    atomic.Int64
		failed  error
		errOnce sync.Once
		wg      sync.WaitGroup
	)
	t0 := time.Now()
	for range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]storage.SubmitRequest, 0, o.SubmitBatch)
			var spans []trace.Span
			for {
				lo := int(next.Add(int64(o.SubmitBatch))) - o.SubmitBatch
				if lo >= o.Runs || ctx.Err() != nil {
					return
				}
				batch = batch[:0]
				spans = spans[:0]
				for i := lo; i < min(lo+o.SubmitBatch, o.Runs); i++ {
					batch = append(batch, storage.SubmitRequest{Group: groupName(i % o.Groups), ID: fmt.Sprintf("r%07d", i), Duration: o.Duration,
						NotBefore: e.due})
					if e.trace != nil { // each run its own trace, as client.Submit makes it
						_, sp := e.trace.tp.Tracer(tracing.Name).Start(ctx, tracing.SpanSubmit, trace.WithNewRoot(),
							trace.WithSpanKind(trace.SpanKindProducer))
						batch[len(batch)-1].TraceParent = tracing.Format(sp.SpanContext())
						spans = append(spans, sp)
					}
				}
				res := st.SubmitBatch(ctx, batch)
				for _, sp := range spans {
					sp.End()
				}
				for j, r := range res {
					if r.Err != nil {
						errOnce.Do(func() { failed = r.Err; cancel() })
						return
					}
					ids[lo+j] = r.Run.ID
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return nil, 0, fmt.Errorf("bench: submit: %w", failed)
	}
	return ids, time.Since(t0), nil
}

// measureWait counts what the hosts, workers and clients send while the
// delayed runs wait: from now (the submits are done) to a second before
// they are due. It returns nil when that window is under a second.
func (e *env) measureWait(ctx context.Context) (*float64, map[string]int64) {
	end := e.due.Add(-time.Second)
	if time.Until(end) < time.Second {
		return nil, nil
	}
	time.Sleep(200 * time.Millisecond) // the timer's look at the new timers
	before, t0 := e.meter.counter.Counts(), time.Now()
	select {
	case <-ctx.Done():
		return nil, nil
	case <-time.After(time.Until(end)):
	}
	after := e.meter.counter.Counts()
	var n int64
	for k, v := range after {
		after[k] = v - before[k]
		n += after[k]
		if after[k] == 0 {
			delete(after, k)
		}
	}
	rate := float64(n) / time.Since(t0).Seconds()
	fmt.Fprintf(e.errw, "bench: %.1f commands/s while %d runs waited for %s\n", rate, e.o.Runs, e.due.UTC().Format(time.RFC3339))
	return &rate, after
}

// addDue records when the delayed runs ran after their not_before.
func (r *Result) addDue(due time.Time, recs []rec) {
	d := due.UTC()
	r.DueAt = &d
	var lat []float64
	var last int64
	for _, x := range recs {
		if x.started > 0 {
			lat = append(lat, float64(x.started-due.UnixMilli()))
			last = max(last, x.started)
		}
	}
	if last > 0 {
		r.DueToAllRunningMS = float64(last - due.UnixMilli())
	}
	p := percentiles(lat)
	r.DueToRunning = &p
}

// addSlowLog records the slowest commands of the run (at most 8).
func (r *Result) addSlowLog(slow []storage.SlowCommand, err error) {
	r.SlowLog = err == nil
	// the harness's own SLOWLOG RESET is not the engine's
	slow = slices.DeleteFunc(slow, func(c storage.SlowCommand) bool { return strings.HasPrefix(strings.ToLower(c.Args), "slowlog") })
	slices.SortFunc(slow, func(a, b storage.SlowCommand) int { return int(b.Took - a.Took) })
	for i, c := range slow {
		if i == 0 {
			r.SlowestMS = float64(c.Took.Microseconds()) / 1e3
		}
		if i < 8 {
			r.SlowCommands = append(r.SlowCommands, fmt.Sprintf("%.2fms %s", float64(c.Took.Microseconds())/1e3, c.Args))
		}
	}
}

// warmUp submits one run to group "warmup" (policy policy) and waits until
// it is final.
func warmUp(ctx context.Context, st *storage.Store, policy string) error {
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

// waitReady waits for a leader and for the workers' slots.
func waitReady(ctx context.Context, st *storage.Store, o Options) error {
	want := max(o.Workers, 1)
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

// tracerProvider is --trace's provider (nil: off).
func (e *env) tracerProvider() trace.TracerProvider {
	if e.trace == nil {
		return nil
	}
	return e.trace.tp
}
