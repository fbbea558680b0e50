package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/policytool"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(policyCommand()))
}

func policyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "build, inspect, test, dry-run, push, list, activate and roll back policies",
		Description: fmt.Sprintf("A policy is a wasm plugin (ABI versions %d to %d, see abi/ABI.md).", abi.MinVersion, abi.Version) + ` Built-in names: wait,
discard, priority (serial), reuse (slot-reuse), and fifo, fair,
priority-first (allocation: the order launched runs get slots in; see
wasmsched namespace set --help). Where a command takes
FILE|NAME, an existing file (or a path ending in .wasm) is read from disk;
otherwise NAME is the active pushed version in the namespace's registry, or
the embedded built-in of that name (no Redis needed for built-ins when Redis
is unreachable).

Exit codes: 0 success, 1 a failed check (a failing scenario, an invalid
dry-run decision) or Redis unreachable, 2 bad usage or bad input.

Examples:
   wasmsched policy build ./mypolicy --out mypolicy.wasm
   wasmsched policy test mypolicy.wasm ./scenarios
   wasmsched policy dry-run --policy mypolicy.wasm --group nightly
   wasmsched policy push nightly-policy mypolicy.wasm --note "oldest first"
   wasmsched policy rollback nightly-policy`,
		Subcommands: []*cli.Command{
			policyBuildCommand(), policyInspectCommand(), policyTestCommand(), policyDryRunCommand(),
			policyPushCommand(), policyListCommand(), policyActivateCommand(), policyRollbackCommand(), policyDeleteCommand(),
		},
	}
}

// sandboxFlags are the sandbox settings of the commands that run a plugin
// (test, dry-run, push): the same limits a host applies, adjustable so an
// author can try a large snapshot offline.
func sandboxFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "policy-timeout", Value: policies.DefaultCallTimeout, Usage: "deadline `D` of one decide call (a host's is serve --policy-timeout)"},
		&cli.StringFlag{Name: "policy-memory", Value: "32MiB", Usage: fmt.Sprintf("memory cap of the plugin, `BYTES` (KiB/MiB/GiB; >= %dMiB)", policies.MinMemoryLimit>>20)},
		&cli.StringFlag{Name: "max-module-size", Value: "8MiB", Usage: "largest plugin accepted, `BYTES` (KiB/MiB/GiB)"},
	}
}

// sandboxFrom reads sandboxFlags.
func sandboxFrom(c *cli.Context) (policytool.Sandbox, error) {
	sb := policytool.Sandbox{Timeout: c.Duration("policy-timeout")}
	if sb.Timeout <= 0 {
		return sb, usageErrorf("--policy-timeout must be > 0, got %v", sb.Timeout)
	}
	var err error
	if sb.Memory, err = parseBytes(c.String("policy-memory")); err != nil {
		return sb, usageErrorf("--policy-memory: %v", err)
	}
	if sb.MaxModuleSize, err = parseBytes(c.String("max-module-size")); err != nil || sb.MaxModuleSize == 0 {
		return sb, usageErrorf("--max-module-size %q: want a positive size such as 8MiB", c.String("max-module-size"))
	}
	if sb.Memory < policies.MinMemoryLimit {
		return sb, usageErrorf("--policy-memory %s: below the minimum %dMiB (a Go guest needs it)", c.String("policy-memory"), policies.MinMemoryLimit>>20)
	}
	if err := sb.Config().Validate(); err != nil {
		return sb, usageErrorf("--policy-memory %s: %s", c.String("policy-memory"), strings.TrimPrefix(err.Error(), "policies: "))
	}
	return sb, nil
}

// tryStore opens the store, or returns nil (and a note on stderr) when
// Redis is unreachable; bad flags are still errors.
func tryStore(c *cli.Context) (*storage.Store, func(), error) {
	// Probe the addresses first (node, cluster seeds or sentinels: any
	// one answering will do): go-redis would retry (and log) for seconds.
	if t, err := storage.ParseRedisURL(globalString(c, flagRedis)); err == nil {
		reachable := false
		for _, addr := range t.Addrs() {
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				conn.Close()
				reachable = true
				break
			}
		}
		if !reachable {
			return nil, func() {}, nil
		}
	}
	st, closeFn, err := openStore(c)
	if err != nil {
		var u *usageError
		if errors.As(err, &u) {
			return nil, nil, err
		}
		return nil, func() {}, nil
	}
	return st, closeFn, nil
}

// --- build ---

func policyBuildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "compile a policy (Go, Rust or C) to a wasm plugin and check that it loads",
		ArgsUsage: "DIR",
		Description: `Detects DIR's language (--lang overrides): Rust when DIR has a Cargo.toml,
AssemblyScript when it has assembly/index.ts, C when it has .c files and no
.go files, else Go. Then runs, in DIR, with the environment inherited:

   Go:    GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o FILE .
   Rust:  cargo build --release --offline --target wasm32-wasip1
          (RUSTFLAGS=-C target-feature=+bulk-memory; the crate is a cdylib
          using abi/rust; the cargo on PATH if its rustc has the
          wasm32-wasip1 (or wasm32-wasi) target, else Debian's
          /usr/bin/cargo; a Cargo.lock that cargo cannot read, written by
          a newer one, is set aside for the build and put back)
   C:     clang --target=wasm32-wasi -O2 -mbulk-memory -nostdlib -ffreestanding
          -I <the SDK header, written by this command> -Wl,--no-entry
          -Wl,--export-dynamic -o FILE DIR/*.c   (not the *_test.c native tests)
   AssemblyScript:
          asc assembly/index.ts --path <the SDK, written by this command as
          the package "wasmsched"> -o FILE -O3 --runtime stub
          --exportStart _initialize --use abort=~lib/wasmsched/index/wsAbort
          --use trace=... --use seed=...   (asc: --asc, else the project's
          node_modules/.bin/asc or one in a folder above, else asc on PATH)

(a C, Rust or AssemblyScript plugin also gets the "wasmsched_sdk" custom section naming
its language, as the SDKs' build scripts do), then loads the result once
with the policy runtime (ABI version, exports, kind, _initialize) and
prints its language, kind, ABI version, size and sha256. A compile error
exits 2 with the compiler's output. docs/plugin-authors.md (Go),
docs/sdk-rust.md, docs/sdk-c.md and docs/sdk-assemblyscript.md walk through
each.

Examples:
   wasmsched policy build ./mypolicy --out mypolicy.wasm
   wasmsched policy build ./my-rust-policy
   wasmsched policy build ./cpolicy --lang c -o json
   wasmsched policy build ./my-as-policy

--out names the output file; -o is the output format, as for every command.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the plugin to `FILE` (default DIR's base name + .wasm)"},
			&cli.StringFlag{Name: "lang", Usage: "the source language `L`: go, rust, c or assemblyscript (default: detected)"},
			&cli.StringFlag{Name: "go", Value: "go", Usage: "the go `COMMAND` to run"},
			&cli.StringFlag{Name: "cargo", Usage: "the cargo `COMMAND` (default: the cargo on PATH if its rustc has a wasm32 WASI target, else /usr/bin/cargo)"},
			&cli.StringFlag{Name: "cc", Value: "clang", Usage: "the C compiler `COMMAND` (clang with the wasm32 target and lld)"},
			&cli.StringFlag{Name: "asc", Usage: "the AssemblyScript compiler `COMMAND` (default: the project's node_modules/.bin/asc, else asc on PATH)"},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "DIR"); err != nil {
				return err
			}
			t := policytool.BuildTools{Go: c.String("go"), Cargo: c.String("cargo"), CC: c.String("cc"), ASC: c.String("asc")}
			b, err := policytool.Build(c.Context, t, c.String("lang"), c.Args().First(), c.String("out"), c.App.ErrWriter)
			if err != nil {
				return err
			}
			return render(c, b, func(w io.Writer) {
				fmt.Fprintf(w, "FILE\t%s\nLANGUAGE\t%s\nKIND\t%s\nABI\t%d\nSIZE\t%d\nSHA256\t%s\n", b.File, b.Language, b.Kind, b.ABIVersion, b.Size, b.SHA256)
			})
		},
	}
}

func policyInspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show a plugin's ABI version, kind, exports, size and sha256",
		ArgsUsage: "FILE",
		Description: `Compiles FILE, lists its exports (with signatures) and imports, then loads it
with the policy runtime to read its ABI version and kind. A file that is not
wasm, lacks an ABI export, has a wrong signature, ABI version or kind exits 2
naming the problem.

Examples:
   wasmsched policy inspect mypolicy.wasm
   wasmsched policy inspect mypolicy.wasm -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "FILE"); err != nil {
				return err
			}
			r, err := policytool.Inspect(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			return render(c, r, func(w io.Writer) {
				fmt.Fprintf(w, "FILE\t%s\nSIZE\t%d\nSHA256\t%s\nABI\t%d\nKIND\t%s\nLANGUAGE\t%s\n\nEXPORT\tTYPE\tSIGNATURE\n",
					r.File, r.Size, r.SHA256, r.ABIVersion, r.Kind, dash(r.Language))
				for _, e := range r.Exports {
					sig := "-"
					if e.Type == "func" {
						sig = "(" + strings.Join(e.Params, ",") + ") -> (" + strings.Join(e.Results, ",") + ")"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\n", e.Name, e.Type, sig)
				}
				fmt.Fprintf(w, "\nIMPORTS\t%s\n", dash(strings.Join(r.Imports, " ")))
				if len(r.Params) > 0 {
					fmt.Fprintln(w, "\nPARAM\tTYPE\tDEFAULT\tMIN\tMAX\tDOC")
					for _, p := range r.Params {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Type, dash(p.Default), dash(p.Min), dash(p.Max), dash(p.Doc))
					}
				}
			})
		},
	}
}

func policyTestCommand() *cli.Command {
	return &cli.Command{
		Name:      "test",
		Usage:     "run scenario files against a policy",
		ArgsUsage: "FILE|NAME PATH...",
		Description: `Runs every scenario of the given files (a directory means all *.json in it)
against the policy and prints PASS or FAIL per scenario, with a diff of
expected and actual actions. A file holds one scenario or a list:

   {"name": "launch-oldest",
    "snapshot": {"max_active": 1, "waiting": [{"id": "r1"}, {"id": "r2"}]},
    "expect": [{"action": "launch", "run": "r1"}]}

   {"name": "dead-worker",
    "request": {"run": {"id": "x"}, "slots": [{"worker": "w1", "alive": false, "held": true}]},
    "expect": {"fail": false, "verdicts": ["reallocate"]}}

   {"name": "tenant-b-first",
    "allocation": {"free": 1, "params": {"fair_label": "tenant"},
                   "runs": [{"id": "a1", "labels": {"tenant": "a"}}, {"id": "b1", "labels": {"tenant": "b"}}],
                   "usage": [{"key": "tenant", "value": "a", "slots": 3}]},
    "expect": ["b1", "a1"]}

Serial actions are compared as a set keyed by run: the order of actions in
a decision does not matter, each run gets at most one action. Verdicts are
compared in task order, an allocation order exactly (the runs it leaves
out wait). An invalid decision always fails. Snapshot fields
follow the ABI (see "JSON form" in docs/plugin-authors.md); omitted states default to WAITING (waiting)
and RUNNING (active), slots to 1, and seqs are numbered in order when no run
has one.

Exit 0 when all pass, 1 when any fails, 2 on a malformed scenario file.

Examples:
   wasmsched policy test mypolicy.wasm ./scenarios
   wasmsched policy test priority scenarios.json -r '^stop-'`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "run", Aliases: []string{"r"}, Usage: "only scenarios whose name matches `REGEX`"},
		}, sandboxFlags()...),
		Action: policyTest,
	}
}

// resolveArg resolves FILE|NAME, opening the store only for names.
func resolveArg(c *cli.Context, arg string) (policytool.Policy, func(), error) {
	if policytool.LooksLikeFile(arg) {
		r, err := policytool.ReadWasmFile(arg)
		return r, func() {}, err
	}
	st, closeFn, err := tryStore(c)
	if err != nil {
		return policytool.Policy{}, nil, err
	}
	r, err := policytool.Resolve(c.Context, st, arg)
	if err != nil {
		closeFn()
		return r, nil, err
	}
	return r, closeFn, nil
}

func testTable(w io.Writer, res policytool.TestResult) {
	for _, s := range res.Scenarios {
		status := "PASS"
		if !s.Pass {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%s\t%s\t(%s)\n", status, s.Name, s.File)
		if s.Error != "" {
			fmt.Fprintf(w, "\terror: %s\n", s.Error)
		}
		for _, d := range s.Diff {
			fmt.Fprintf(w, "\t%s\n", d)
		}
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed\n", res.Policy, res.Passed, res.Failed)
}

// --- dry-run ---

func policyDryRunCommand() *cli.Command {
	return &cli.Command{
		Name:  "dry-run",
		Usage: "show what a policy would decide for a snapshot file, a live group or the live slot queue, writing nothing",
		Description: `--policy takes a .wasm file, a built-in name (wait, discard, priority; works
with no Redis at all) or a pushed name (its active version). The snapshot is
read from --snapshot FILE (the JSON form in docs/plugin-authors.md; "-" = stdin; a scenario
file's "snapshot" also works) or from the live --group in Redis (one
read-only script; nothing is written). With --group the group's active
policy decides too, and the difference is shown (per run: active's action
vs the candidate's, "none" for no action).

An allocation policy (fifo, fair, priority-first, or a pushed one) orders
the launched runs waiting for slots: give it an allocation snapshot file
(wasmsched namespace snapshot --allocation writes one; a scenario's
"allocation" works too), or --allocation for the live namespace (read
only), where the namespace's own allocation policy orders the same runs
beside it. It prints the order, which runs fit the free slots now, and
how many runs the candidate places differently.

Prints each action with its reason and the validation verdict. Exit 0 when
the candidate's decision is valid, 1 when it is invalid (or the policy
trapped or timed out), 2 on bad input.

Examples:
   wasmsched policy dry-run --policy priority --snapshot snap.json
   wasmsched policy dry-run --policy mypolicy.wasm --group nightly -o json
   wasmsched policy dry-run --policy fair --allocation
   wasmsched policy dry-run --policy myalloc.wasm --snapshot alloc.json`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Usage: "the candidate: `FILE|NAME`"},
			&cli.StringFlag{Name: "snapshot", Aliases: []string{"s"}, Usage: "snapshot JSON `FILE` (- = stdin): a group's or an allocation snapshot"},
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "read the live group `G` from Redis"},
			&cli.BoolFlag{Name: "allocation", Usage: "order the live namespace's launched runs (an allocation policy)"},
		}, sandboxFlags()...),
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none; use --policy and --snapshot or --group"); err != nil {
				return err
			}
			sb, err := sandboxFrom(c)
			if err != nil {
				return err
			}
			polArg, snapFile, group := c.String("policy"), c.String("snapshot"), c.String("group")
			if polArg == "" {
				return usageErrorf("dry-run: --policy FILE|NAME is required")
			}
			if btoi(snapFile != "")+btoi(group != "")+btoi(c.Bool("allocation")) != 1 {
				return usageErrorf("dry-run: give exactly one of --snapshot FILE, --group G and --allocation")
			}
			if c.Bool("allocation") || (snapFile != "" && isAllocationFile(snapFile)) {
				return allocationDryRun(c, sb, polArg, snapFile)
			}
			var snap *abi.SerialSnapshot
			var st *storage.Store
			closeFn := func() {}
			if group != "" {
				if err := limits.ValidateName("group", group); err != nil {
					return asUsage(err)
				}
				st, closeFn, err = openStore(c)
				if err != nil {
					return err
				}
			} else {
				if snap, err = policytool.ReadSnapshotFile(snapFile); err != nil {
					return asUsage(err)
				}
				if !policytool.LooksLikeFile(polArg) {
					if st, closeFn, err = tryStore(c); err != nil {
						return err
					}
				}
			}
			defer closeFn()
			res, err := policytool.DryRun(c.Context, sb, st, polArg, snap, group)
			if err != nil {
				return err
			}
			if err := render(c, res, func(w io.Writer) { dryRunTable(w, res) }); err != nil {
				return err
			}
			if !res.Valid {
				what := map[string]string{"invalid": "invalid decision", "timeout": "the decision exceeded its deadline", "trap": "the policy trapped"}[res.Outcome]
				return &checkFailed{msg: fmt.Sprintf("policy %s: %s: %s", res.Policy, what, strings.Join(res.Errors, "; "))}
			}
			return nil
		},
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isAllocationFile reports whether the snapshot file holds an allocation
// snapshot (read once more by allocationDryRun; stdin is read there).
func isAllocationFile(path string) bool {
	if path == "-" {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && policytool.IsAllocation(b)
}

// allocationDryRun is dry-run of an allocation policy: on a snapshot file,
// or (file "") the live namespace.
func allocationDryRun(c *cli.Context, sb policytool.Sandbox, polArg, file string) error {
	var snap *abi.AllocationSnapshot
	var st *storage.Store
	closeFn := func() {}
	var err error
	if file == "" {
		if st, _, closeFn, err = openNamespace(c, true); err != nil {
			return err
		}
	} else {
		b, err := os.ReadFile(file)
		if err != nil {
			return asUsage(err)
		}
		if snap, err = policytool.ParseAllocationFile(file, b); err != nil {
			return asUsage(err)
		}
		if !policytool.LooksLikeFile(polArg) {
			if st, closeFn, err = tryStore(c); err != nil {
				return err
			}
		}
	}
	defer closeFn()
	res, err := policytool.DryRunAllocation(c.Context, sb, st, polArg, snap)
	if err != nil {
		return err
	}
	if err := render(c, res, func(w io.Writer) { io.WriteString(w, policytool.AllocationText(res)) }); err != nil {
		return err
	}
	if !res.Valid {
		return &checkFailed{msg: fmt.Sprintf("policy %s: %s order: %s", res.Policy, res.Outcome, strings.Join(res.Errors, "; "))}
	}
	return nil
}

func decisionTable(w io.Writer, title string, d client.PolicyDecision) {
	verdict := map[string]string{"valid": "valid", "invalid": "INVALID", "timeout": "TIMEOUT", "trap": "TRAP"}[d.Outcome]
	if verdict == "" {
		verdict = "valid"
		if !d.Valid {
			verdict = "INVALID"
		}
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", title, d.Policy, digest.Short(d.Version), verdict)
	if len(d.Actions) == 0 {
		fmt.Fprintln(w, "\t(no actions)")
	}
	for _, a := range d.Actions {
		fmt.Fprintf(w, "\t%s\t%s\t%s\n", a.Action, a.Key(), a.Reason)
	}
	for _, e := range d.Errors {
		fmt.Fprintf(w, "\terror:\t%s\n", e)
	}
}

func dryRunTable(w io.Writer, r client.DryRun) {
	decisionTable(w, "CANDIDATE", r.PolicyDecision)
	if r.Active != nil {
		decisionTable(w, "ACTIVE", *r.Active)
		if len(r.Diff) == 0 {
			fmt.Fprintf(w, "DIFF\tnone: both decide the same for group %s\n", r.Group)
		} else {
			fmt.Fprintln(w, "DIFF\tRUN\tACTIVE\tCANDIDATE")
			for _, d := range r.Diff {
				fmt.Fprintf(w, "\t%s\t%s\t%s\n", d.Run, d.Active, d.Candidate)
			}
		}
	}
}

// --- push / list / activate / rollback ---

// whoAmI is recorded with registry writes: user@host.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	h, _ := os.Hostname()
	if h == "" {
		return name
	}
	return name + "@" + h
}

func policyPushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "gate a plugin and push it as a new version of NAME (activated unless --no-activate)",
		ArgsUsage: "NAME FILE",
		Description: `The push gate runs before anything is written: the plugin must compile,
export an ABI version this host runs (` + fmt.Sprintf("%d to %d", abi.MinVersion, abi.Version) + `), have the kind of NAME (built-ins: wait, discard and priority are
serial, reuse is slot-reuse; a new name takes the plugin's kind, later pushes
must match it), and pass a conformance run on canned snapshots (empty, only
waiting, with active runs, STOPPING, max_active 2 and 3, ...) with a valid
decision for each, within --deadline. Any failure exits 2 naming the problem,
and Redis is unchanged. Pushing bytes already pushed under NAME exits 2 and
names that version.

Activation bumps the policy generation and notifies every host (pub/sub);
each host switches on its next pass.

NAME a built-in (wait, discard, priority, reuse, fifo, fair,
priority-first): an activated push replaces the built-in for every group
(or namespace) that uses that name, "wait" being every new group's default.
It is refused without --force; push under your own name and set it on the
groups that need it instead. "policy activate NAME builtin" (or a rollback
past the first version) returns to the built-in.

Examples:
   wasmsched policy push oldest-first mypolicy.wasm --note "first cut"
   wasmsched policy push priority mypriority.wasm --no-activate
   wasmsched policy push wait mywait.wasm --force   # replace the built-in wait`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded with the version"},
			&cli.BoolFlag{Name: "no-activate", Usage: "store the version without activating it"},
			&cli.BoolFlag{Name: "force", Usage: "activate a push under a built-in's name (replaces the built-in for its groups)"},
			&cli.DurationFlag{Name: "deadline", Value: policies.DefaultGateDeadline, Usage: "bound of the conformance run"},
		}, sandboxFlags()...),
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 2, "NAME FILE"); err != nil {
				return err
			}
			name, file := c.Args().Get(0), c.Args().Get(1)
			if err := limits.ValidateName("policy", name); err != nil {
				return asUsage(err)
			}
			if _, builtin := plugins.Builtin(name); builtin && !c.Bool("no-activate") && !c.Bool("force") {
				return usageErrorf("push %s refused, nothing written: %s is a built-in policy, and an activated push replaces it for every group "+
					"that uses it in the namespace (wait is every new group's default); push under your own name "+
					"(wasmsched policy push my-%s %s) and set it on the groups that need it (group set G --policy my-%s), "+
					"or pass --force to replace the built-in (policy activate %s builtin returns to it)", name, name, name, file, name, name)
			}
			wasm, err := os.ReadFile(file)
			if err != nil {
				return asUsage(err)
			}
			sb, err := sandboxFrom(c)
			if err != nil {
				return err
			}
			// The static limits before anything else: a host never loads
			// what fails them, so neither Redis nor the gate sees it.
			if err := policies.CheckLimits(sb.Config(), name, wasm); err != nil {
				return policytool.LoadError(err)
			}
			st, _, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := policytool.Push(c.Context, sb, st, name, wasm, whoAmI(), c.String("note"), !c.Bool("no-activate"), c.Duration("deadline"))
			if err != nil {
				return err
			}
			if _, builtin := plugins.Builtin(name); builtin {
				what := "activating it replaces"
				if res.Active {
					what = "it replaces"
				}
				fmt.Fprintf(c.App.ErrWriter, "wasmsched: warning: %s the built-in %s for every group of namespace %s that uses it "+
					"(policy activate %s builtin returns to it)\n", what, name, st.Namespace(), name)
			}
			return render(c, res, func(w io.Writer) {
				state := "active"
				if !res.Active {
					state = "not activated"
				}
				fmt.Fprintf(w, "pushed %s version %d (%s, sha256 %s, %d conformance cases passed): %s\n",
					res.Name, res.Version, res.Kind, digest.Short(res.SHA256), res.Cases, state)
			})
		},
	}
}

func policyListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list policies (pushed and built-in) with versions and history",
		ArgsUsage: "[NAME]",
		Description: `Lists every pushed policy and every built-in, with its kind, active version
(0 = the embedded built-in), versions (sha256, when, who, note) and history
(push, activate, rollback, auto-rollback). A host that rolled a version back
after --rollback-after consecutive failed decisions is shown with the reason
("auto_rollback" in json). With NAME, only that policy.

Examples:
   wasmsched policy list
   wasmsched policy list oldest-first -o json`,
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usageErrorf("list: want at most one argument (NAME), got %d", c.NArg())
			}
			st, _, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			ps, err := host.Policies(c.Context, st)
			if err != nil {
				return err
			}
			if name := c.Args().First(); name != "" {
				i := slices.IndexFunc(ps, func(p client.Policy) bool { return p.Name == name })
				if i < 0 {
					return usageErrorf("policy %s not found in namespace %s (see wasmsched policy list)", name, st.Namespace())
				}
				ps = ps[i : i+1]
			}
			return render(c, ps, func(w io.Writer) { policyTable(w, ps) })
		},
	}
}

func policyTable(w io.Writer, ps []client.Policy) {
	fmt.Fprintln(w, "NAME\tKIND\tACTIVE\tVERSION\tSHA256\tPUSHED\tWHO\tNOTE")
	for _, p := range ps {
		act := strconv.Itoa(p.Active)
		if p.Active == 0 {
			act = "built-in"
			if !p.Builtin {
				act = "none"
			}
		}
		if len(p.Versions) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t-\t-\t-\t-\t-\n", p.Name, p.Kind, act)
		}
		for _, v := range p.Versions {
			mark := ""
			if v.Version == p.Active {
				mark = "*"
			}
			sha := digest.Short(v.SHA256)
			if v.Deleted {
				sha = "(deleted)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d%s\t%s\t%s\t%s\t%s\n", p.Name, p.Kind, act, v.Version, mark,
				sha, tableTime(v.PushedAt), dash(v.Who), dash(v.Note))
		}
	}
	for _, p := range ps {
		if a := p.AutoRollback; a != nil {
			to := strconv.Itoa(a.To)
			if a.To == 0 {
				to = "the built-in"
			}
			fmt.Fprintf(w, "\n%s: auto-rolled back from version %d to %s at %s: %s\n", p.Name, a.From, to, tableTime(a.At), a.Reason)
		}
	}
}

type activeJSON struct {
	Name    string `json:"name"`
	Active  int    `json:"active"`
	SHA256  string `json:"sha256"`
	Message string `json:"message"`
}

func policyActivateCommand() *cli.Command {
	return &cli.Command{
		Name:      "activate",
		Usage:     "make a pushed version of NAME active (or none: the built-in)",
		ArgsUsage: "NAME VERSION",
		Description: `VERSION is a version number (as in policy list), a unique sha256 prefix
(at least 8 hex digits), or 0 ("builtin", "none"): no pushed version, so a
built-in name (wait, discard, priority, reuse, fifo, fair, priority-first)
runs its embedded built-in again, and any other name has no active version
(its groups hold until one is activated; the policy can then be deleted).
Every host switches on its next pass.

Examples:
   wasmsched policy activate oldest-first 2
   wasmsched policy activate oldest-first 3fa2b9c01d
   wasmsched policy activate wait builtin     # back to the built-in wait`,
		Flags: []cli.Flag{&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded in the history"}},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 2, "NAME VERSION"); err != nil {
				return err
			}
			st, cl, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			name := c.Args().Get(0)
			p, err := cl.Policy(c.Context, name)
			if err != nil {
				return err
			}
			ver, err := parseVersionArg(p, c.Args().Get(1))
			if err != nil {
				return err
			}
			if err := checkActivation(c, st, name, ver); err != nil {
				return err
			}
			if err := cl.ActivatePolicy(c.Context, name, ver, whoAmI(), c.String("note")); err != nil {
				return err
			}
			res := activeJSON{Name: name, Active: ver, Message: activeMessage(name, ver)}
			if ver > 0 {
				res.SHA256 = p.Versions[ver-1].SHA256
			}
			return render(c, res, func(w io.Writer) { fmt.Fprintln(w, res.Message) })
		},
	}
}

// checkActivation refuses an activation that leaves a group of the policy
// with parameters the version does not accept (exit 2 naming it).
func checkActivation(c *cli.Context, st *storage.Store, name string, ver int) error {
	return withInspector(c.Context, policytool.Sandbox{}, func(in *host.Inspector) error {
		err := in.CheckActivation(c.Context, st, name, ver)
		if errors.Is(err, host.ErrInvalidParams) {
			return usageErrorf("activate %s %d refused, nothing written: %s", name, ver, paramProblem(err))
		}
		return policytool.LoadError(err)
	})
}

// activeMessage says which version of name is active now: a pushed one, the
// built-in, or none.
func activeMessage(name string, ver int) string {
	switch _, builtin := plugins.Builtin(name); {
	case ver > 0:
		return fmt.Sprintf("policy %s: version %d is active", name, ver)
	case builtin:
		return fmt.Sprintf("policy %s: the built-in is active (no pushed version)", name)
	}
	return fmt.Sprintf("policy %s: no version is active: its groups hold until one is (policy activate %s VERSION)", name, name)
}

func parseVersionArg(p client.Policy, s string) (int, error) {
	if s == "builtin" || s == "built-in" || s == "none" {
		return 0, nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "v")); err == nil {
		if n < 0 || n > len(p.Versions) {
			return 0, usageErrorf("policy %s has no version %d (versions 1..%d, or 0: none, the built-in)", p.Name, n, len(p.Versions))
		}
		return n, nil
	}
	if len(s) < 8 {
		return 0, usageErrorf("version %q: want a number or a sha256 prefix of at least 8 hex digits", s)
	}
	found := 0
	for _, v := range p.Versions {
		if strings.HasPrefix(v.SHA256, strings.ToLower(s)) {
			if found != 0 {
				return 0, usageErrorf("sha256 prefix %q matches more than one version of %s", s, p.Name)
			}
			found = v.Version
		}
	}
	if found == 0 {
		return 0, usageErrorf("policy %s has no version with sha256 prefix %q", p.Name, s)
	}
	return found, nil
}

func policyDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a version that is not active, or a policy with no active version",
		ArgsUsage: "NAME",
		Description: `With --version V, deletes version V of NAME: refused (exit 2) while V is
active. The version keeps its number (policy list shows it as deleted),
leaves the rollback stack and can no longer be activated. Without
--version, deletes NAME with all its versions and history: refused while
one of its versions is active. A plugin's bytes are removed from Redis only
when no version of any policy still uses them.

Examples:
   wasmsched policy delete oldest-first --version 2
   wasmsched policy delete experiment`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "version", Usage: "delete only version `V` (>= 1)"},
			&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded in the history"},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "NAME"); err != nil {
				return err
			}
			name := c.Args().First()
			if err := limits.ValidateName("policy", name); err != nil {
				return asUsage(err)
			}
			v := c.Int("version")
			if c.IsSet("version") && v < 1 {
				return usageErrorf("--version must be >= 1, got %d", v)
			}
			_, cl, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			n, err := cl.DeletePolicy(c.Context, name, v, whoAmI(), c.String("note"))
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("deleted policy %s", name)
			if v > 0 {
				msg = fmt.Sprintf("deleted version %d of policy %s", v, name)
			}
			res := struct {
				Name         string `json:"name"`
				Version      int    `json:"version,omitempty"`
				BlobsDeleted int    `json:"blobs_deleted"`
				Message      string `json:"message"`
			}{name, v, n, msg}
			return render(c, res, func(w io.Writer) { fmt.Fprintln(w, msg) })
		},
	}
}

func policyRollbackCommand() *cli.Command {
	return &cli.Command{
		Name:      "rollback",
		Usage:     "re-activate the version that was active before the current one",
		ArgsUsage: "NAME",
		Description: `Activations form a stack: rolling back twice goes two steps back. Past
the first pushed version it goes to version 0: the embedded built-in of a
built-in name, none for another name (its groups hold until a version is
activated). From version 0, exit 2. Every host switches on its next pass.

Examples:
   wasmsched policy rollback oldest-first --note "v3 starves group nightly"`,
		Flags: []cli.Flag{&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded in the history"}},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "NAME"); err != nil {
				return err
			}
			_, cl, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			name := c.Args().First()
			v, err := cl.RollbackPolicy(c.Context, name, whoAmI(), c.String("note"))
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("policy %s: rolled back to version %d", name, v.Version)
			if v.Version == 0 {
				msg = fmt.Sprintf("policy %s: rolled back past its first version: ", name) + strings.TrimPrefix(activeMessage(name, 0), "policy "+name+": ")
			}
			res := activeJSON{Name: name, Active: v.Version, SHA256: v.SHA256, Message: msg}
			return render(c, res, func(w io.Writer) { fmt.Fprintln(w, res.Message) })
		},
	}
}

func policyTest(c *cli.Context) error {
	if c.NArg() < 2 {
		return usageErrorf("test: want a policy (FILE|NAME) and at least one scenario PATH, got %d argument(s)", c.NArg())
	}
	sb, err := sandboxFrom(c)
	if err != nil {
		return err
	}
	var filter *regexp.Regexp
	if s := c.String("run"); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			return usageErrorf("-r %q: %v", s, err)
		}
		filter = re
	}
	files, err := policytool.ScenarioFiles(c.Args().Tail())
	if err != nil {
		return asUsage(err)
	}
	var scs []policytool.Scenario
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return asUsage(err)
		}
		s, err := policytool.ParseScenarios(f, b)
		if err != nil {
			return asUsage(err)
		}
		for _, sc := range s {
			if filter == nil || filter.MatchString(sc.Name) {
				scs = append(scs, sc)
			}
		}
	}
	if len(scs) == 0 {
		return usageErrorf("test: no scenarios to run (files %s, -r %q)", strings.Join(files, ", "), c.String("run"))
	}
	pol, closeFn, err := resolveArg(c, c.Args().First())
	if err != nil {
		return err
	}
	defer closeFn()
	res, err := policytool.Test(c.Context, sb, pol, scs)
	if err != nil {
		return err
	}
	if err := render(c, res, func(w io.Writer) { testTable(w, res) }); err != nil {
		return err
	}
	if res.Failed > 0 {
		return &checkFailed{msg: fmt.Sprintf("%d of %d scenario(s) failed", res.Failed, res.Failed+res.Passed)}
	}
	return nil
}
