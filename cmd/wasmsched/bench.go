package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/bench"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/limits"
)

func init() {
	commands = append(commands, benchCommand())
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
   Redis time   per run, from the first submit to the last final run: the
                time Redis spent on what the hosts, workers and clients
                sent (INFO commandstats deltas; scripts exactly, other
                commands by their share of the command's calls), the
                server's CPU (used_cpu_user+sys), and the commands sent per
                run by name (a go-redis hook). The bench itself waits on run
                events and reads the runs once at the end.

Before the clock starts, one warm-up run goes through a group "warmup" of
the same policy (the hosts load and compile the policy on first use).
--policy and --window set the generated groups' settings; --script-times
adds each script's Redis time per run (SLOWLOG at threshold 0, read every
50 ms while the runs go; the reads slow the engine a little); --slowlog reports
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
			&cli.IntFlag{Name: "window", Usage: "snapshot window `N` of the generated groups (group set --window)", DefaultText: fmt.Sprint(limits.DefaultWindow)},
			&cli.StringFlag{Name: "require", Usage: "every generated group requires the labels `K=V,...` and the in-process workers carry them (placement's cost)"},
			&cli.BoolFlag{Name: "http-workers", Usage: "the in-process workers go through the HTTP worker protocol of an in-process API server (its cost against the worker library)"},
			&cli.StringFlag{Name: "prefer", Usage: "every generated group prefers the labels `K=V:W,...` and the in-process workers carry them (preferences' cost)"},
			&cli.BoolFlag{Name: "trace", Usage: "trace every run: the in-process hosts, workers and clients use an OpenTelemetry SDK (every span sampled) exporting over OTLP/HTTP to a sink in this process (tracing's cost)"},
			&cli.StringFlag{Name: "placement", Usage: "the namespace's placement `MODE`: spread, pack or policy (namespace set --placement; placement's cost)"},
			&cli.IntFlag{Name: "runs", Usage: "submit `N` runs", DefaultText: "10 x --groups"},
			&cli.IntFlag{Name: "workers", Value: 4, Usage: "in-process simulated workers `W` (0 = use the running ones)"},
			&cli.IntFlag{Name: "slots", Value: 128, Usage: "slots `S` per in-process worker"},
			&cli.IntFlag{Name: "hosts", Value: 1, Usage: "in-process hosts `H` (0 = use the running leader)"},
			&cli.DurationFlag{Name: "duration", Value: 0, Usage: "simulated run duration `D`"},
			&cli.IntFlag{Name: "clients", Value: 16, Usage: "concurrent submitting clients `C`"},
			&cli.IntFlag{Name: "submit-batch", Value: 32, Usage: "each client submits `N` runs per pipelined round trip (storage.SubmitBatch; the harness's load generator, not the engine: 1 = one Submit per run)"},
			&cli.IntFlag{Name: "coordinators", Usage: "batches of groups the in-process hosts decide at once, `N` (0 = the host default)", DefaultText: "the host default"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "give up after `D`"},
			&cli.DurationFlag{Name: "heartbeat-ttl", Value: 150 * time.Millisecond, Usage: "heartbeat TTL `D` of the in-process workers (they heartbeat every D/3; new runs are picked up at once via slot-events)"},
			&cli.DurationFlag{Name: "lease-ttl", Value: host.DefaultLeaseTTL, Usage: "leader lease TTL `D` of the in-process hosts"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the generated namespace's keys"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile to `FILE`"},
			&cli.BoolFlag{Name: "script-times", Usage: "report each script's Redis time per run (sets the server's slowlog-log-slower-than to 0 and reads its SLOWLOG while the runs go, which slows the engine a little; restored afterwards)"},
			&cli.BoolFlag{Name: "slowlog", Usage: "report the slowest Redis commands of the run (sets the server's slowlog-log-slower-than to 1ms and resets its SLOWLOG; restored afterwards)"},
			&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "log `LEVEL` of the in-process hosts and workers"},
			&cli.DurationFlag{Name: "delay", Usage: "submit every run with the same not_before, the first whole second `D` after the start: how long until all are launched once due, and what the namespace sends while they wait", DefaultText: "none"},
		},
		Action: benchAction,
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

func benchAction(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageErrorf("bench: unexpected arguments %q", c.Args().Slice())
	}
	o := bench.Options{
		Groups:       c.Int("groups"),
		Policy:       c.String("policy"),
		Window:       c.Int("window"),
		SlowLog:      c.Bool("slowlog"),
		ScriptTimes:  c.Bool("script-times"),
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
		Delay:        c.Duration("delay"),
		Placement:    c.String("placement"),
		Trace:        c.Bool("trace"),
		HTTPWorkers:  c.Bool("http-workers"),
	}
	if c.IsSet("require") {
		o.Require = map[string]string{}
		for _, kv := range splitList(c.String("require")) {
			l, err := limits.ParseLabel(kv)
			if err != nil {
				return usageErrorf("bench: --require: %s", err)
			}
			o.Require[l.Key] = l.Value
		}
	}
	for _, p := range splitList(c.String("prefer")) {
		if _, err := limits.ParsePreference(p); err != nil {
			return usageErrorf("bench: --prefer: %s", err)
		}
		o.Prefer = append(o.Prefer, p)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return usageErrorf("bench: --log-level %q: want debug, info, warn or error", c.String("log-level"))
	}
	if globalIsSet(c, flagNamespace) {
		o.Namespace = globalString(c, flagNamespace)
	}
	if err := o.Check(); err != nil {
		return err
	}
	if _, err := outputFormat(c); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
	res, err := bench.Run(c.Context, globalString(c, flagRedis), o, c.App.ErrWriter, log)
	if res != nil {
		if rerr := render(c, res, func(w io.Writer) { bench.Table(w, res) }); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
