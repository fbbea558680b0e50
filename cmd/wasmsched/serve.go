package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, serveCommand())
}

// serveOptions are the parsed flags of `serve`.
type serveOptions struct {
	Advertise     string
	LeaseTTL      time.Duration
	AdminAddr     string
	LogLevel      string
	Coordinators  int
	PolicyTimeout time.Duration
	PolicyMemory  uint64
	PolicyMaxSize uint64        // --policy-max-module-size
	RollbackAfter int           // --rollback-after: 0 disables
	Retention     time.Duration // --retention: the namespace default; 0 = forever
	SlotGuard     time.Duration // --slot-guard
	UnfitTimeout  time.Duration // --unfit-timeout
	MaxRunSlots   int           // --max-run-slots: 0 = only limits.MaxRunSlots
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run a host: compete for the namespace's leadership and lead when elected",
		Description: `Competes for the leader lock of --namespace with the identity stamp
ADDR#START_UNIX_NANO#RANDOM (ADDR from --advertise; a host restarted at the
same address is a new identity and never adopts its predecessor's lease).
The leader bumps the namespace's fencing epoch, refreshes the lock every
TTL/3 and runs the leader tasks: a fenced tick every TTL/3 (shown by
"wasmsched leader"), the serial coordinator (--coordinators groups at a time;
each group's policy runs in a wasm sandbox with --policy-timeout and
--policy-memory), the slot manager (oldest first, all-or-nothing; a run that does not fit
lets younger ones that fit pass it for --slot-guard, then the freed slots
are held for it; one needing more slots than every live worker has together
for --unfit-timeout is failed) and the
failover restore (reuses slots that live workers still hold; reaps dead
workers). When a refresh fails, the lease runs out or a write is
fenced, it stops deciding at once, drains its tasks and stands by; standbys
try to obtain the lock every ~TTL/4.

SIGINT/SIGTERM: stop the leader tasks, release the lock (a standby takes over
at once, without waiting for the TTL), exit 0.

The admin server (--admin-addr, "" disables) serves /healthz, /readyz,
/metrics (wasmsched_leader, wasmsched_decisions_total, wasmsched_slots,
wasmsched_runs, ...) and /status (JSON: leading, epoch, policies loaded,
counters, last passes, slots free/assigned).
Logs (text) go to stderr.

Examples:
   wasmsched serve
   wasmsched --redis redis://r:6379/0 -n prod serve --advertise 10.0.0.7:9090 --lease-ttl 3s
   wasmsched serve --admin-addr 127.0.0.1:0 --lease-ttl 1s`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "advertise", Usage: "this host's `ADDR`, part of its identity (default <hostname>:<admin port>, or <hostname> with the admin server off)"},
			&cli.DurationFlag{Name: "lease-ttl", Value: host.DefaultLeaseTTL, Usage: fmt.Sprintf("leader lease TTL `D` (>= %v); refresh every D/3", host.MinLeaseTTL)},
			&cli.StringFlag{Name: "admin-addr", Value: host.DefaultAdminAddr, Usage: "admin HTTP `ADDR` (/healthz, /readyz, /metrics); \"\" disables"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log `LEVEL`: debug, info, warn, error"},
			&cli.IntFlag{Name: "coordinators", Value: host.DefaultCoordinators, Usage: fmt.Sprintf("batches of up to 64 groups decided and applied at once, `N` in 1..%d (one at a time while a launched run waits for slots)", host.MaxCoordinators)},
			&cli.DurationFlag{Name: "policy-timeout", Value: policies.DefaultCallTimeout, Usage: "deadline `D` of one policy decide call (> 0)"},
			&cli.StringFlag{Name: "policy-memory", Value: "32MiB", Usage: fmt.Sprintf("memory cap per policy instance, `BYTES` (plain or with KiB/MiB/GiB; >= %dMiB)", policies.MinMemoryLimit>>20)},
			&cli.StringFlag{Name: "policy-max-module-size", Value: "8MiB", Usage: "largest policy module this host loads, `BYTES` (a pushed version over it is never loaded)"},
			&cli.StringFlag{Name: "retention", Value: "7d", Usage: "keep finished runs for `D` (e.g. 36h, 7d; 0 = forever) unless their group says otherwise (group set --retention)"},
			&cli.DurationFlag{Name: "slot-guard", Value: host.DefaultSlotGuard, Usage: "a launched run that does not fit lets younger runs that fit take slots past it for `D`, then the freed slots are held for it (0 = hold at once: strict FIFO)"},
			&cli.DurationFlag{Name: "unfit-timeout", Value: host.DefaultUnfitTimeout, Usage: "fail a launched run that needs more slots than every live worker has together for longer than `D` (> 0)"},
			&cli.IntFlag{Name: "max-run-slots", Usage: fmt.Sprintf("when leading, make `N` (1..%d) the most slots one run may ask in the namespace: submit refuses more (exit 2 / 400); 0 = only the built-in %d", limits.MaxRunSlots, limits.MaxRunSlots)},
			&cli.IntFlag{Name: "rollback-after", Value: host.DefaultRollbackAfter, Usage: "roll a pushed policy version back after `K` consecutive failed decisions (trap, timeout, invalid); 0 disables"},
			&cli.StringFlag{Name: "namespaces", Usage: "compete for each of `LIST` (comma-separated, or \"all\" = every registered namespace) instead of --namespace"},
			&cli.IntFlag{Name: "balance-slack", Usage: "with --namespaces: lead at most ceil(namespaces/hosts)+`N` before resigning one; -1 disables balancing"},
		}, apiFlags("")...),
		Action: serve,
	}
}

// check validates the flags (usage errors name the flag).
func (o serveOptions) check() error {
	if o.LeaseTTL < host.MinLeaseTTL {
		return usageErrorf("serve: --lease-ttl must be >= %v, got %v", host.MinLeaseTTL, o.LeaseTTL)
	}
	if o.Coordinators < 1 || o.Coordinators > host.MaxCoordinators {
		return usageErrorf("serve: --coordinators must be in 1..%d, got %d", host.MaxCoordinators, o.Coordinators)
	}
	if o.RollbackAfter < 0 {
		return usageErrorf("serve: --rollback-after must be >= 0 (0 disables), got %d", o.RollbackAfter)
	}
	if o.SlotGuard < 0 {
		return usageErrorf("serve: --slot-guard must be >= 0 (0 = strict FIFO), got %v", o.SlotGuard)
	}
	if o.MaxRunSlots < 0 || o.MaxRunSlots > limits.MaxRunSlots {
		return usageErrorf("serve: --max-run-slots must be in 0..%d (0 = only the built-in bound), got %d", limits.MaxRunSlots, o.MaxRunSlots)
	}
	if o.UnfitTimeout <= 0 {
		return usageErrorf("serve: --unfit-timeout must be > 0, got %v", o.UnfitTimeout)
	}
	if o.PolicyTimeout <= 0 {
		return usageErrorf("serve: --policy-timeout must be > 0, got %v", o.PolicyTimeout)
	}
	if err := o.runtimeConfig().Validate(); err != nil {
		return usageErrorf("serve: --policy-memory/--policy-timeout: %v", err)
	}
	if o.Advertise != "" && strings.ContainsAny(o.Advertise, "#{},| \t\r\n") {
		return usageErrorf("serve: --advertise %q must not contain '#', '{', '}', ',', '|' or whitespace", o.Advertise)
	}
	return nil
}

// runtimeConfig is the leader runtime's configuration from the flags.
func (o serveOptions) runtimeConfig() host.EngineConfig {
	rollback := o.RollbackAfter
	if rollback == 0 {
		rollback = -1 // the flag's 0 disables; EngineConfig's 0 means the default
	}
	retention := o.Retention
	if retention == 0 {
		retention = -1 // the flag's 0 keeps forever; EngineConfig's 0 means the default
	}
	guard := o.SlotGuard
	if guard == 0 {
		guard = 1 // the flag's 0 holds at once; EngineConfig's 0 means the default
	}
	return host.EngineConfig{Coordinators: o.Coordinators, PolicyTimeout: o.PolicyTimeout, PolicyMemory: o.PolicyMemory,
		PolicyMaxModuleSize: o.PolicyMaxSize, RollbackAfter: rollback, Retention: retention, SlotGuard: guard, UnfitTimeout: o.UnfitTimeout, MaxRunSlots: o.MaxRunSlots,
		TracerProvider: tracerProvider}
}

// parseRetention parses a retention: a Go duration or whole days ("7d"),
// "0" for forever, and (with allowDefault) "default" for the namespace's
// default (client.RetentionDefault).
func parseRetention(s string, allowDefault bool) (time.Duration, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "default" && allowDefault:
		return client.RetentionDefault, nil
	case t == "0":
		return 0, nil
	case strings.HasSuffix(t, "d"):
		n, err := strconv.Atoi(strings.TrimSuffix(t, "d"))
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q: want a positive number of days (7d), a duration (36h) or 0 (forever)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < time.Millisecond {
		hint := "a duration (36h), whole days (7d) or 0 (forever)"
		if allowDefault {
			hint += ", or default"
		}
		return 0, fmt.Errorf("%q: want %s", s, hint)
	}
	return d, nil
}

// parseBytes parses a byte count: digits, optionally followed by K/KiB,
// M/MiB or G/GiB (powers of 1024) or B.
func parseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q: want a byte count like 33554432 or 32MiB", s)
	}
	n, err := strconv.ParseUint(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", s, err)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	default:
		return 0, fmt.Errorf("%q: unknown unit %q (want B, KiB, MiB or GiB)", s, t[i:])
	}
	if n > (^uint64(0))>>shift {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return n << shift, nil
}

// defaultAdvertise is <hostname>:<admin port>, or <hostname> without an
// admin server.
func defaultAdvertise(admin net.Listener) string {
	name, _ := os.Hostname()
	if name == "" {
		name = "localhost"
	}
	if admin == nil {
		return name
	}
	if ta, ok := admin.Addr().(*net.TCPAddr); ok {
		return fmt.Sprintf("%s:%d", name, ta.Port)
	}
	return name
}

func serve(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageErrorf("serve: unexpected arguments %q", c.Args().Slice())
	}
	o := serveOptions{
		Advertise:     c.String("advertise"),
		LeaseTTL:      c.Duration("lease-ttl"),
		AdminAddr:     c.String("admin-addr"),
		LogLevel:      c.String("log-level"),
		Coordinators:  c.Int("coordinators"),
		PolicyTimeout: c.Duration("policy-timeout"),
		RollbackAfter: c.Int("rollback-after"),
		SlotGuard:     c.Duration("slot-guard"),
		UnfitTimeout:  c.Duration("unfit-timeout"),
		MaxRunSlots:   c.Int("max-run-slots"),
	}
	ret, err := parseRetention(c.String("retention"), false)
	if err != nil {
		return usageErrorf("serve: --retention: %v", err)
	}
	o.Retention = ret
	mem, err := parseBytes(c.String("policy-memory"))
	if err != nil {
		return usageErrorf("serve: --policy-memory: %v", err)
	}
	o.PolicyMemory = mem
	if o.PolicyMaxSize, err = parseBytes(c.String("policy-max-module-size")); err != nil || o.PolicyMaxSize == 0 {
		return usageErrorf("serve: --policy-max-module-size %q: want a positive size such as 8MiB", c.String("policy-max-module-size"))
	}
	if err := o.check(); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return usageErrorf("serve: --log-level %q: want debug, info, warn or error", o.LogLevel)
	}
	ns := globalString(c, flagNamespace)
	if err := limits.ValidateName("namespace", ns); err != nil {
		return asUsage(err)
	}
	rdb, closeFn, err := openClient(c)
	if err != nil {
		return err
	}
	defer closeFn()
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))

	var admin net.Listener
	if o.AdminAddr != "" {
		if admin, err = host.ListenAdmin(o.AdminAddr); err != nil {
			return listenError("serve: --admin-addr", err)
		}
		defer admin.Close()
	}
	adv := o.Advertise
	if adv == "" {
		adv = defaultAdvertise(admin)
	}
	if c.IsSet("namespaces") {
		return serveMulti(c, rdb, o, adv, log, admin) // serve_multi.go
	}
	st, err := storage.New(rdb, ns)
	if err != nil {
		return asUsage(err)
	}
	apiSrv, err := startAPI(c, st, nil, log)
	if err != nil {
		return err
	}
	defer apiSrv.Stop()
	h, err := host.New(c.Context, host.Config{Store: st, Advertise: adv, LeaseTTL: o.LeaseTTL, Logger: log, Admin: admin,
		Engine: o.runtimeConfig()})
	if err != nil {
		return asUsage(err)
	}
	defer closeHost(c.Context, h, log)
	return h.Run(c.Context)
}
