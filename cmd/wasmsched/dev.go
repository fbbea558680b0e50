package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/embedded"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, devCommand())
}

// devOptions are the parsed flags of `dev`.
type devOptions struct {
	Addr         string
	Slots        int
	AdminAddr    string
	APIAddr      string // "" = off
	APITokens    string
	LeaseTTL     time.Duration
	HeartbeatTTL time.Duration
	LogLevel     string
}

// Dev defaults: a short lease and heartbeat so a laptop session feels
// immediate (one process: there is nobody to fail over to anyway).
const (
	defaultDevAddr         = "127.0.0.1:6380"
	defaultDevAdminAddr    = "127.0.0.1:9090"
	defaultDevAPIAddr      = "127.0.0.1:8080"
	defaultDevLeaseTTL     = host.DefaultLeaseTTL
	defaultDevHeartbeatTTL = 600 * time.Millisecond
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run everything in one process: embedded store, a host, a simulated worker",
		Description: `Starts, in one process:
   - an embedded Redis-compatible store (miniredis) on --addr, running the
     same Lua scripts as Redis; its state lives in memory and is gone on exit;
   - a host (the same runtime as "serve": leadership, serial coordinator,
     slot manager, failover restore) with the built-in policies
     (wait, discard, priority, reuse);
   - a local simulated worker with --slots slots (a run "takes" its submitted
     --duration, then SUCCEEDED; payload "fail" makes it FAILED);
   - the admin server on --admin-addr (/healthz, /readyz, /metrics).

It prints the --redis URL the other commands use (export WASMSCHED_REDIS=...)
and a few commands to try. The global --redis flag is ignored (dev is the
store). Ctrl-C (SIGINT/SIGTERM) stops the worker and the host, releases the
leader lock and exits 0.

Examples:
   go run ./cmd/wasmsched dev
   wasmsched dev --addr 127.0.0.1:0 --slots 8 --admin-addr ""
   wasmsched -n demo dev --log-level warn`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "addr", Value: defaultDevAddr, Usage: "embedded store listen `ADDR` (127.0.0.1:0 = a free port)"},
			&cli.IntFlag{Name: "slots", Value: 4, Usage: "slots `N` (>= 1) of the local simulated worker"},
			&cli.StringFlag{Name: "admin-addr", Value: defaultDevAdminAddr, Usage: "admin HTTP `ADDR` (/healthz, /readyz, /metrics); \"\" disables"},
			&cli.DurationFlag{Name: "lease-ttl", Value: defaultDevLeaseTTL, Usage: "leader lease TTL `D`"},
			&cli.DurationFlag{Name: "heartbeat-ttl", Value: defaultDevHeartbeatTTL, Usage: "worker heartbeat TTL `D` (it heartbeats, and picks up work, every D/3)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log `LEVEL`: debug, info, warn, error"},
		}, apiFlags(defaultDevAPIAddr)...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return usageErrorf("dev: unexpected arguments %q", c.Args().Slice())
			}
			o := devOptions{
				Addr:         c.String("addr"),
				Slots:        c.Int("slots"),
				AdminAddr:    c.String("admin-addr"),
				LeaseTTL:     c.Duration("lease-ttl"),
				HeartbeatTTL: c.Duration("heartbeat-ttl"),
				LogLevel:     c.String("log-level"),
				APIAddr:      c.String("api-addr"),
				APITokens:    c.String("api-tokens"),
			}
			if err := o.check(); err != nil {
				return err
			}
			ns := globalString(c, flagNamespace)
			if err := limits.ValidateName("namespace", ns); err != nil {
				return asUsage(err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
				return usageErrorf("dev: --log-level %q: want debug, info, warn or error", o.LogLevel)
			}
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
			return runDev(c.Context, o, ns, c.App.Writer, log)
		},
	}
}

func (o devOptions) check() error {
	if o.Slots < 1 {
		return usageErrorf("dev: --slots must be >= 1, got %d", o.Slots)
	}
	if o.Addr == "" {
		return usageErrorf("dev: --addr must not be empty (127.0.0.1:0 picks a free port)")
	}
	if o.LeaseTTL < host.MinLeaseTTL {
		return usageErrorf("dev: --lease-ttl must be >= %v, got %v", host.MinLeaseTTL, o.LeaseTTL)
	}
	if o.HeartbeatTTL < 30*time.Millisecond {
		return usageErrorf("dev: --heartbeat-ttl must be >= 30ms, got %v", o.HeartbeatTTL)
	}
	return nil
}

// runDev runs the embedded store, a host and a simulated worker until ctx
// ends. The banner (URL and example commands) goes to out.
func runDev(ctx context.Context, o devOptions, ns string, out io.Writer, log *slog.Logger) error {
	srv, err := embedded.Start(o.Addr)
	if err != nil {
		return listenError("dev: --addr", err)
	}
	defer srv.Close()
	url := srv.URL()

	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer rdb.Close()
	st, err := storage.New(rdb, ns)
	if err != nil {
		return asUsage(err)
	}
	// Load the scripts before anything runs (the worker registers at once).
	if err := st.Load(ctx); err != nil {
		return fmt.Errorf("dev: %w", err)
	}

	var admin net.Listener
	if o.AdminAddr != "" {
		if admin, err = host.ListenAdmin(o.AdminAddr); err != nil {
			return listenError("dev: --admin-addr", err)
		}
		defer admin.Close()
	}
	reg := prometheus.NewRegistry() // the host's and the worker's metrics, on one admin server
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h, err := host.New(ctx, host.Config{Store: st, Advertise: "dev-host", LeaseTTL: o.LeaseTTL,
		Logger: log.With("component", "host"), Admin: admin, Registry: reg,
		Engine: host.EngineConfig{TracerProvider: tracerProvider}})
	if err != nil {
		return asUsage(err)
	}
	defer closeHost(ctx, h, log)
	w, err := worker.New(ctx, worker.Config{Client: st.Redis(), Namespace: st.Namespace(), Advertise: "dev-worker",
		Slots: o.Slots, HeartbeatTTL: o.HeartbeatTTL, DrainTimeout: time.Second,
		Logger: log.With("component", "worker", "namespace", ns), Registerer: reg})
	if err != nil {
		return asUsage(err)
	}
	w.HandleDefault(worker.Simulate())

	apiSrv, err := openAPI(ctx, "dev", o.APIAddr, o.APITokens, st, nil, log.With("component", "api"))
	if err != nil {
		return err
	}
	defer apiSrv.Stop()

	printDevBanner(out, url, ns, o, admin)
	if apiSrv != nil {
		fmt.Fprintf(out, "wasmsched dev: web UI at %s/ui/ and HTTP API at %s/api/v1 (--api-addr \"\" turns them off)\n", apiSrv.URL, apiSrv.URL)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel() // one part failing stops the whole dev process
		errs[0] = h.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		errs[1] = w.Run(ctx)
	}()
	wg.Wait()
	fmt.Fprintln(out, "wasmsched dev: stopped")
	return errors.Join(errs...)
}

func printDevBanner(out io.Writer, url, ns string, o devOptions, admin net.Listener) {
	fmt.Fprintf(out, "wasmsched dev: embedded store at %s (namespace %s; in memory, gone on exit)\n", url, ns)
	fmt.Fprintf(out, "wasmsched dev: one host (built-in policies wait, discard, priority, reuse) and one simulated worker with %d slots\n", o.Slots)
	if admin != nil {
		fmt.Fprintf(out, "wasmsched dev: admin server at http://%s (/healthz, /readyz, /metrics)\n", admin.Addr())
	}
	fmt.Fprintf(out, "\nIn another shell:\n\n")
	fmt.Fprintf(out, "    export WASMSCHED_REDIS=%s\n", url)
	if ns != defaultNamespace {
		fmt.Fprintf(out, "    export WASMSCHED_NAMESPACE=%s\n", ns)
	}
	cmd := selfCommand()
	fmt.Fprintf(out, "    %s submit demo --duration 2s\n", cmd)
	fmt.Fprintf(out, "    %s group set latest --policy priority\n", cmd)
	fmt.Fprintf(out, "    %s submit latest --duration 10s; %s submit latest --duration 1s\n", cmd, cmd)
	fmt.Fprintf(out, "    %s runs\n", cmd)
	fmt.Fprintf(out, "    %s slots\n", cmd)
	fmt.Fprintf(out, "    %s leader\n\n", cmd)
	fmt.Fprintf(out, "Ctrl-C stops it.\n")
}

// closeHost closes a host's engine after its Run returned (bounded).
func closeHost(ctx context.Context, h *host.Host, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := h.Close(cctx); err != nil {
		log.Warn("closing the host", "err", err)
	}
}

// selfCommand is how the user can call this binary again: "go run
// ./cmd/wasmsched" when started with go run (the binary then lives in a
// temporary go-build directory), else "wasmsched".
func selfCommand() string {
	if exe, err := os.Executable(); err == nil && strings.Contains(exe, "go-build") {
		return "go run ./cmd/wasmsched"
	}
	return "wasmsched"
}
