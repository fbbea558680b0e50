package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
)

func init() {
	commands = append(commands, workerCommand())
}

// workerOptions are the parsed flags of `worker`.
type workerOptions struct {
	Slots        int
	Advertise    string
	Simulate     bool
	Exec         string
	ExecArgs     []string
	HeartbeatTTL time.Duration
	StopGrace    time.Duration
	Journal      string
	Metrics      string
	DrainTimeout time.Duration
	EnvDeny      []string
	Labels       map[string]string // --label: what it carries for placement
	Groups       []string          // --groups: the groups it serves (none: every group)
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:      "worker",
		Usage:     "run a worker agent: register slots, execute assigned runs, report outcomes",
		ArgsUsage: "[-- PROGRAM-ARGS...]",
		Description: `Registers N fixed slots under a fresh identity ADDR#START_UNIX_NANO#RANDOM
(a worker restarted at the same address is a new worker), heartbeats every
TTL/3, and executes every run whose task 0 is assigned to one of its slots,
exactly once per assignment token. Stop requests kill the run and report
STOPPED. If the worker misses its heartbeats and is reaped, it drops its work
(those runs were reassigned) and registers again.

SIGINT/SIGTERM drains: the worker takes no new runs, waits up to
--drain-timeout for the runs in flight, then interrupts the rest (FAILED
"interrupted by worker shutdown", retried if they have attempts left),
deregisters and exits. A second SIGINT/SIGTERM interrupts them at once.

Exactly one mode:
   --simulate        a run takes its submitted --duration, then SUCCEEDED;
                     a payload of exactly "fail" makes it FAILED.
   --exec PROGRAM    runs PROGRAM (arguments after "--"; checked at start:
                     a missing or non-executable one exits 2) in its own
                     process group with WASMSCHED_RUN_ID, WASMSCHED_GROUP,
                     WASMSCHED_PAYLOAD and WASMSCHED_NAMESPACE set, and the
                     worker's environment without the variables matching
                     --exec-env-deny (default WASMSCHED_REDIS,
                     WASMSCHED_API_TOKENS, REDISCLI_AUTH: the Redis
                     password stays with the worker); its stdout/stderr are
                     logged line by line and their last 4 KiB and its exit
                     code kept on the run (run show); exit 0 is
                     SUCCEEDED, else FAILED with the exit status. A stop sends
                     SIGTERM to the group, SIGKILL after --stop-grace. A run
                     with a timeout (submit --timeout) is stopped the same way
                     when it has run that long: FAILED "timed out after D".
                     The program also gets WASMSCHED_ATTEMPT (1, 2, ...).

Placement: --label K=V (repeatable) are labels this worker carries; a group
that requires labels (group set --require) sends its runs only to workers
with every one of them. --groups G,G (names, or patterns with '*') makes it
serve only those groups: no run of another group is placed on it. Without
--groups it serves every group (those that require nothing, and those whose
requirements its labels meet); slots lists each worker's labels and groups.

Logs go to stderr. --journal appends "RUN_ID TOKEN ATTEMPT" per execution start
(fsynced), for audits.

Examples:
   wasmsched worker --slots 4 --advertise 10.0.0.7:7070 --simulate
   wasmsched worker --slots 2 --advertise w1:7070 --exec ./job.sh
   wasmsched worker --slots 1 --advertise w1:7070 --exec /bin/sh -- -c 'echo $WASMSCHED_PAYLOAD'
   wasmsched --redis redis://r:6379/0 worker --slots 8 --advertise w2:7070 --simulate --journal /var/log/ws.journal
   wasmsched worker --advertise gpu1:7070 --exec ./train.sh --label gpu=a100 --label zone=eu
   wasmsched worker --advertise w3:7070 --simulate --groups 'thumbnails,reports-*'`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "slots", Value: 1, Usage: "number of fixed slots `N` (>= 1)"},
			&cli.StringFlag{Name: "advertise", Usage: "this worker's `ADDR` (host:port), part of its identity (required)"},
			&cli.BoolFlag{Name: "simulate", Usage: "simulate runs (sleep --duration; payload \"fail\" fails)"},
			&cli.StringFlag{Name: "exec", Usage: "execute `PROGRAM` per run"},
			&cli.DurationFlag{Name: "heartbeat-ttl", Value: worker.DefaultHeartbeatTTL, Usage: "heartbeat TTL `D`; heartbeats every D/3"},
			&cli.DurationFlag{Name: "stop-grace", Value: worker.DefaultStopGrace, Usage: "time `D` between SIGTERM and SIGKILL of a stopped program"},
			&cli.StringFlag{Name: "journal", Usage: "append \"RUN_ID TOKEN ATTEMPT\" per execution start to `FILE`"},
			&cli.StringFlag{Name: "metrics-listen", Usage: "serve Prometheus /metrics on `ADDR` (e.g. :9102)"},
			&cli.DurationFlag{Name: "drain-timeout", Value: worker.DefaultDrainTimeout, Usage: "on SIGTERM wait up to `D` for the runs in flight"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "a label `K=V` this worker carries, for placement (repeatable, at most 16)"},
			&cli.StringFlag{Name: "groups", Usage: "serve only these groups: `G,G` (names, or patterns with '*'; default: every group)"},
			&cli.StringFlag{Name: "exec-env-deny", Value: strings.Join(worker.DefaultExecEnvDeny, ","), Usage: "environment variables (comma-separated `PATTERNS`, e.g. 'AWS_*') the program does not get; \"\" = none"},
		},
		Action: workerAction,
	}
}

// workerAction runs `wasmsched worker`: flags checked before anything
// connects, then the worker until SIGINT/SIGTERM.
func workerAction(c *cli.Context) error {
	o := workerOptions{
		Slots:        c.Int("slots"),
		Advertise:    c.String("advertise"),
		Simulate:     c.Bool("simulate"),
		Exec:         c.String("exec"),
		ExecArgs:     c.Args().Slice(),
		HeartbeatTTL: c.Duration("heartbeat-ttl"),
		StopGrace:    c.Duration("stop-grace"),
		Journal:      c.String("journal"),
		Metrics:      c.String("metrics-listen"),
		DrainTimeout: c.Duration("drain-timeout"),
		EnvDeny:      splitList(c.String("exec-env-deny")),
	}
	labels, err := labelFlags(c, "label", abi.MaxLabels)
	if err != nil {
		return err
	}
	o.Labels, o.Groups = limits.LabelsMap(labels), splitList(c.String("groups"))
	if err := o.check(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil)).With("namespace", globalString(c, flagNamespace))
	var h worker.Handler = worker.Simulate()
	if o.Exec != "" {
		var err error
		if h, err = worker.Exec(worker.ExecConfig{Program: o.Exec, Args: o.ExecArgs, StopGrace: o.StopGrace,
			EnvDeny: o.EnvDeny, Logger: log}); err != nil {
			return asUsage(err) // nothing registered
		}
	}
	st, _, closeFn, err := openNamespace(c, false)
	if err != nil {
		return err
	}
	defer closeFn()
	reg := prometheus.NewRegistry()
	w, err := worker.New(c.Context, worker.Config{Client: st.Redis(), Namespace: st.Namespace(), Advertise: o.Advertise,
		Slots: o.Slots, HeartbeatTTL: o.HeartbeatTTL, StopGrace: o.StopGrace, DrainTimeout: o.DrainTimeout,
		Journal: o.Journal, Logger: log, Registerer: reg, Labels: o.Labels, Groups: o.Groups})
	if err != nil {
		return asUsage(err)
	}
	w.HandleDefault(h)
	return runWorker(c.Context, w, o.Metrics, reg, log)
}

// splitList splits a comma-separated flag value ("" = none).
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// check validates the flags (usage errors name the flag).
func (o workerOptions) check() error {
	if o.Simulate == (o.Exec != "") {
		return usageErrorf("worker: give exactly one of --simulate or --exec PROGRAM")
	}
	if o.Slots < 1 {
		return usageErrorf("worker: --slots must be >= 1, got %d", o.Slots)
	}
	if strings.TrimSpace(o.Advertise) == "" {
		return usageErrorf("worker: --advertise ADDR is required")
	}
	if strings.ContainsAny(o.Advertise, "#{},| \t\r\n") {
		return usageErrorf("worker: --advertise %q must not contain '#', '{', '}', ',', '|' or whitespace", o.Advertise)
	}
	if o.HeartbeatTTL < 30*time.Millisecond {
		return usageErrorf("worker: --heartbeat-ttl must be >= 30ms, got %v", o.HeartbeatTTL)
	}
	if o.StopGrace <= 0 {
		return usageErrorf("worker: --stop-grace must be positive, got %v", o.StopGrace)
	}
	if o.DrainTimeout < 0 {
		return usageErrorf("worker: --drain-timeout must not be negative, got %v", o.DrainTimeout)
	}
	if len(o.ExecArgs) > 0 && o.Exec == "" {
		return usageErrorf("worker: unexpected arguments %q (program arguments need --exec PROGRAM)", o.ExecArgs)
	}
	if err := limits.ValidateGroups(o.Groups); err != nil {
		return usageErrorf("worker: --groups: %s", errs.UserMessage(err))
	}
	return nil
}

// runWorker serves metrics (if asked) and runs w until ctx ends (the first
// SIGINT/SIGTERM: it drains); a second signal stops the drain at once.
func runWorker(ctx context.Context, w *worker.Worker, metricsAddr string, reg *prometheus.Registry, log *slog.Logger) error {
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return asUsage(fmt.Errorf("worker: --metrics-listen %s: %w", metricsAddr, err))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		}()
		defer srv.Close()
		log.Info("serving metrics", "addr", ln.Addr().String())
	}
	go func() {
		<-ctx.Done() // the first signal (main's NotifyContext): the drain starts
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		if _, ok := <-again; ok {
			log.Warn("second signal: stopping the drain now")
			w.StopNow()
		}
	}()
	return w.Run(ctx)
}
