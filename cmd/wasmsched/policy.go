package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	csdk "github.com/wasmsched/wasmsched/abi/c"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/digest"
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
		Description: `A policy is a wasm plugin (ABI v1, see abi/ABI.md). Built-in names: wait,
discard, priority (serial) and reuse (slot-reuse). Where a command takes
FILE|NAME, an existing file (or a path ending in .wasm) is read from disk;
otherwise NAME is the active pushed version in the namespace's registry, or
the embedded built-in of that name (no Redis needed for built-ins when Redis
is unreachable).

Exit codes: 0 success, 1 a failed check (a failing scenario, an invalid
dry-run decision) or Redis unreachable, 2 bad usage or bad input.

Examples:
   wasmsched policy build ./mypolicy -o mypolicy.wasm
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

// quietLogger drops the runtime's own warnings: the CLI reports errors itself.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// sandbox is the policy sandbox of one CLI command (sandboxFlags); the
// zero value is the runtime's defaults.
type sandbox struct {
	Timeout       time.Duration // --policy-timeout
	Memory        uint64        // --policy-memory
	MaxModuleSize uint64        // --max-module-size
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
func sandboxFrom(c *cli.Context) (sandbox, error) {
	sb := sandbox{Timeout: c.Duration("policy-timeout")}
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
	if err := sb.config().Validate(); err != nil {
		return sb, usageErrorf("--policy-memory %s: %s", c.String("policy-memory"), strings.TrimPrefix(err.Error(), "policies: "))
	}
	return sb, nil
}

func (sb sandbox) config() policies.Config {
	return policies.Config{Logger: quietLogger, PoolSize: 1, CallTimeout: sb.Timeout, MemoryLimit: sb.Memory, MaxModuleSize: sb.MaxModuleSize}
}

// newPolicyRuntime returns a runtime for one CLI command (compilation cache
// in the user cache dir, or none if WASMSCHED_NO_CACHE is set).
func newPolicyRuntime(ctx context.Context, sb sandbox) (*policies.Runtime, error) {
	cfg := sb.config()
	if os.Getenv("WASMSCHED_NO_CACHE") != "" {
		cfg.CacheDir = "-"
	} else if _, err := policies.DefaultCacheDir(); err != nil {
		cfg.CacheDir = "-"
	}
	return policies.NewRuntime(ctx, cfg)
}

// loadUsage marks load and gate errors (bad plugin bytes) as usage errors.
func loadUsage(err error) error {
	if err != nil {
		err = &termsError{err}
	}
	for _, s := range []error{policies.ErrNotWasm, policies.ErrABIVersion, policies.ErrMissingExport,
		policies.ErrKind, policies.ErrInstantiate, policies.ErrConformance, policies.ErrLimit, policies.ErrCompileTimeout} {
		if errors.Is(err, s) {
			return asUsage(err)
		}
	}
	return err
}

// termsError is err with cliTerms applied to its message.
type termsError struct{ err error }

func (e *termsError) Error() string { return cliTerms(e.err.Error()) }
func (e *termsError) Unwrap() error { return e.err }

// --- resolving FILE|NAME ---

// resolvedPolicy is a policy's wasm and where it came from.
type resolvedPolicy struct {
	Name     string // file path or policy name
	Source   string // file, builtin, registry
	Version  int    // registry version (0 otherwise)
	SHA256   string
	Wasm     []byte
	Registry string // note for humans, e.g. "registry v3"
}

func (r resolvedPolicy) label() string {
	switch r.Source {
	case "registry":
		return fmt.Sprintf("%s v%d", r.Name, r.Version)
	case "builtin":
		return r.Name + " (built-in)"
	}
	return r.Name
}

func looksLikeFile(arg string) bool {
	if strings.HasSuffix(arg, ".wasm") || strings.ContainsRune(arg, os.PathSeparator) {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && !fi.IsDir()
}

func readWasmFile(path string) (resolvedPolicy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return resolvedPolicy{}, asUsage(err)
	}
	return resolvedPolicy{Name: path, Source: "file", SHA256: digest.SHA256(b), Wasm: b}, nil
}

// resolvePolicy reads a policy given as FILE or NAME. st may be nil (no
// Redis): then only files and built-ins resolve.
func resolvePolicy(ctx context.Context, st *storage.Store, arg string) (resolvedPolicy, error) {
	if looksLikeFile(arg) {
		return readWasmFile(arg)
	}
	if err := storage.ValidateName("policy", arg); err != nil {
		return resolvedPolicy{}, asUsage(err)
	}
	res, err := host.ResolvePolicy(ctx, st, arg) // the hosts' resolver
	switch {
	case errors.Is(err, host.ErrUnknownPolicy) && st == nil:
		return resolvedPolicy{}, usageErrorf("policy %q: no such file and not a built-in (%s); Redis is unreachable, so pushed policies cannot be read",
			arg, strings.Join(plugins.Names(), ", "))
	case errors.Is(err, host.ErrUnknownPolicy) && strings.Contains(err.Error(), "is held"):
		return resolvedPolicy{}, asUsage(err)
	case errors.Is(err, host.ErrUnknownPolicy):
		return resolvedPolicy{}, usageErrorf("policy %q: no such file, not a built-in (%s) and no active version in namespace %s",
			arg, strings.Join(plugins.Names(), ", "), st.Namespace())
	case err != nil:
		return resolvedPolicy{}, err
	}
	b, err := res.Wasm(ctx, st)
	if err != nil {
		return resolvedPolicy{}, err
	}
	if res.Builtin() {
		return resolvedPolicy{Name: arg, Source: "builtin", SHA256: res.SHA256, Wasm: b}, nil
	}
	return resolvedPolicy{Name: arg, Source: "registry", Version: res.Registry, SHA256: res.SHA256, Wasm: b}, nil
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

type buildJSON struct {
	File       string `json:"file"`
	Language   string `json:"language"`
	Kind       string `json:"kind"`
	ABIVersion int    `json:"abi_version"`
	Size       int    `json:"size"`
	SHA256     string `json:"sha256"`
}

func policyBuildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "compile a policy (Go, Rust or C) to a wasm plugin and check that it loads",
		ArgsUsage: "DIR",
		Description: `Detects DIR's language (--lang overrides): Rust when DIR has a Cargo.toml, C
when it has .c files and no .go files, else Go. Then runs, in DIR, with the
environment inherited:

   Go:    GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o FILE .
   Rust:  cargo build --release --offline --target wasm32-wasi
          (RUSTFLAGS=-C target-feature=+bulk-memory; the crate is a cdylib
          using abi/rust; Debian's /usr/bin/cargo and rustc when present)
   C:     clang --target=wasm32-wasi -O2 -mbulk-memory -nostdlib -ffreestanding
          -I <the SDK header, written by this command> -Wl,--no-entry
          -Wl,--export-dynamic -o FILE DIR/*.c

(a C or Rust plugin also gets the "wasmsched_sdk" custom section naming
its language, as the SDKs' build scripts do), then loads the result once
with the policy runtime (ABI version, exports, kind, _initialize) and
prints its language, kind, ABI version, size and sha256. A compile error
exits 2 with the compiler's output. docs/plugin-authors.md (Go),
docs/sdk-rust.md and docs/sdk-c.md walk through each.

Examples:
   wasmsched policy build ./mypolicy --out mypolicy.wasm
   wasmsched policy build ./my-rust-policy
   wasmsched policy build ./cpolicy --lang c -o json

--out names the output file; -o is the output format, as for every command.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the plugin to `FILE` (default DIR's base name + .wasm)"},
			&cli.StringFlag{Name: "lang", Usage: "the source language `L`: go, rust or c (default: detected)"},
			&cli.StringFlag{Name: "go", Value: "go", Usage: "the go `COMMAND` to run"},
			&cli.StringFlag{Name: "cargo", Usage: "the cargo `COMMAND` (default /usr/bin/cargo if present, else cargo)"},
			&cli.StringFlag{Name: "cc", Value: "clang", Usage: "the C compiler `COMMAND` (clang with the wasm32 target and lld)"},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "DIR"); err != nil {
				return err
			}
			t := buildTools{Go: c.String("go"), Cargo: c.String("cargo"), CC: c.String("cc")}
			b, err := buildPolicy(c.Context, t, c.String("lang"), c.Args().First(), c.String("out"), c.App.ErrWriter)
			if err != nil {
				return err
			}
			return render(c, b, func(w io.Writer) {
				fmt.Fprintf(w, "FILE\t%s\nLANGUAGE\t%s\nKIND\t%s\nABI\t%d\nSIZE\t%d\nSHA256\t%s\n", b.File, b.Language, b.Kind, b.ABIVersion, b.Size, b.SHA256)
			})
		},
	}
}

// buildTools are the compilers policy build runs.
type buildTools struct{ Go, Cargo, CC string }

// detectLanguage is policy build's language of dir.
func detectLanguage(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
		return "rust"
	}
	cs, _ := filepath.Glob(filepath.Join(dir, "*.c"))
	gos, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(cs) > 0 && len(gos) == 0 {
		return "c"
	}
	return "go"
}

// sdkSection is the custom section "wasmsched_sdk" with lang as payload.
func sdkSection(lang string) []byte {
	name := "wasmsched_sdk"
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, lang...)
	return append([]byte{0, byte(len(body))}, body...)
}

func buildPolicy(ctx context.Context, t buildTools, lang, dir, out string, stderr io.Writer) (buildJSON, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return buildJSON{}, asUsage(err)
	}
	if !fi.IsDir() {
		return buildJSON{}, usageErrorf("build: %s is not a directory", dir)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return buildJSON{}, err
	}
	if lang == "" {
		lang = detectLanguage(absDir)
	}
	if out == "" {
		out = filepath.Base(absDir) + ".wasm"
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return buildJSON{}, err
	}
	tmp, err := os.MkdirTemp("", "wasmsched-build-")
	if err != nil {
		return buildJSON{}, err
	}
	defer os.RemoveAll(tmp)
	var cmd *exec.Cmd
	switch lang {
	case "go":
		cmd = exec.CommandContext(ctx, t.Go, "build", "-buildmode=c-shared", "-trimpath", "-o", absOut, ".")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	case "rust":
		cargo, env := t.Cargo, os.Environ()
		if cargo == "" {
			cargo = "cargo"
			if _, err := os.Stat("/usr/bin/cargo"); err == nil {
				cargo = "/usr/bin/cargo"
			}
		}
		if _, err := os.Stat("/usr/bin/rustc"); err == nil && os.Getenv("RUSTC") == "" {
			env = append(env, "RUSTC=/usr/bin/rustc")
		}
		env = append(env, "CARGO_TARGET_DIR="+filepath.Join(tmp, "target"), "RUSTFLAGS=-C target-feature=+bulk-memory")
		cmd = exec.CommandContext(ctx, cargo, "build", "--release", "--offline", "--target", "wasm32-wasi")
		cmd.Env = env
	case "c":
		if err := os.WriteFile(filepath.Join(tmp, "wasmsched.h"), csdk.Header, 0o644); err != nil {
			return buildJSON{}, err
		}
		srcs, _ := filepath.Glob(filepath.Join(absDir, "*.c"))
		if len(srcs) == 0 {
			return buildJSON{}, usageErrorf("build: --lang c but %s has no .c file", dir)
		}
		args := []string{"--target=wasm32-wasi", "-O2", "-mbulk-memory", "-nostdlib", "-ffreestanding", "-I", tmp,
			"-Wl,--no-entry", "-Wl,--export-dynamic", "-Wl,--strip-debug", "-o", absOut}
		cmd = exec.CommandContext(ctx, t.CC, append(args, srcs...)...)
	default:
		return buildJSON{}, usageErrorf("build: --lang %q: want go, rust or c", lang)
	}
	cmd.Dir = absDir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return buildJSON{}, usageErrorf("build %s (%s): %v:\n%s", dir, lang, err, strings.TrimSpace(buf.String()))
	}
	if buf.Len() > 0 {
		_, _ = stderr.Write(buf.Bytes())
	}
	if lang == "rust" { // the crate's one cdylib
		ws, _ := filepath.Glob(filepath.Join(tmp, "target", "wasm32-wasi", "release", "*.wasm"))
		if len(ws) != 1 {
			return buildJSON{}, usageErrorf("build %s (rust): want one cdylib .wasm in the cargo output, found %d (crate-type = [\"cdylib\"] in Cargo.toml)", dir, len(ws))
		}
		b, err := os.ReadFile(ws[0])
		if err != nil {
			return buildJSON{}, err
		}
		if err := os.WriteFile(absOut, b, 0o644); err != nil {
			return buildJSON{}, err
		}
	}
	wasm, err := os.ReadFile(absOut)
	if err != nil {
		return buildJSON{}, err
	}
	if lang == "c" { // the SDK section, as plugins/c/build.sh appends it
		wasm = append(wasm, sdkSection("c")...)
		if err := os.WriteFile(absOut, wasm, 0o644); err != nil {
			return buildJSON{}, err
		}
	}
	rt, err := newPolicyRuntime(ctx, sandbox{})
	if err != nil {
		return buildJSON{}, err
	}
	defer rt.Close(context.Background())
	p, err := rt.Load(ctx, out, wasm)
	if err != nil {
		return buildJSON{}, loadUsage(fmt.Errorf("built %s but it is not a valid plugin: %w", out, err))
	}
	defer p.Close(context.Background())
	return buildJSON{File: out, Language: lang, Kind: p.Kind().String(), ABIVersion: int(p.ABIVersion()), Size: len(wasm), SHA256: digest.SHA256(wasm)}, nil
}

// --- inspect ---

type exportJSON struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"` // func, memory, global, table
	Params  []string `json:"params,omitempty"`
	Results []string `json:"results,omitempty"`
}

type inspectJSON struct {
	File       string `json:"file"`
	Size       int    `json:"size"`
	SHA256     string `json:"sha256"`
	ABIVersion int    `json:"abi_version"`
	Kind       string `json:"kind"`
	// Language is the source language the module says (the SDK's
	// "wasmsched_sdk" custom section: "c", "rust"; "go" for a Go build's
	// go:buildid section), "" when it says none.
	Language string       `json:"language"`
	Exports  []exportJSON `json:"exports"`
	Imports  []string     `json:"imports"`
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
			r, err := inspectPolicy(c.Context, c.Args().First())
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
			})
		},
	}
}

func inspectPolicy(ctx context.Context, path string) (inspectJSON, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return inspectJSON{}, asUsage(err)
	}
	r := inspectJSON{File: path, Size: len(wasm), SHA256: digest.SHA256(wasm), Exports: []exportJSON{}, Imports: []string{}}
	rt, err := newPolicyRuntime(ctx, sandbox{})
	if err != nil {
		return r, err
	}
	defer rt.Close(context.Background())
	// Load first: it gives the precise message for non-wasm bytes, wrong
	// exports, ABI version and kind.
	p, err := rt.Load(ctx, path, wasm)
	if err != nil {
		return r, loadUsage(err)
	}
	r.Kind = p.Kind().String()
	r.ABIVersion = int(p.ABIVersion())
	_ = p.Close(ctx)

	wr := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCustomSections(true))
	defer wr.Close(context.Background())
	cm, err := wr.CompileModule(ctx, wasm)
	if err != nil {
		return r, usageErrorf("inspect %s: %v", path, err)
	}
	for _, cs := range cm.CustomSections() {
		switch {
		case cs.Name() == "wasmsched_sdk" && len(cs.Data()) <= 32:
			r.Language = strings.ToValidUTF8(string(cs.Data()), "?")
		case cs.Name() == "go:buildid" && r.Language == "":
			r.Language = "go"
		}
	}
	types := func(ts []api.ValueType) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = api.ValueTypeName(t)
		}
		return out
	}
	for name, f := range cm.ExportedFunctions() {
		r.Exports = append(r.Exports, exportJSON{Name: name, Type: "func", Params: types(f.ParamTypes()), Results: types(f.ResultTypes())})
	}
	for name := range cm.ExportedMemories() {
		r.Exports = append(r.Exports, exportJSON{Name: name, Type: "memory"})
	}
	sort.Slice(r.Exports, func(i, j int) bool { return r.Exports[i].Name < r.Exports[j].Name })
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		r.Imports = append(r.Imports, mod+"."+name)
	}
	sort.Strings(r.Imports)
	r.Imports = slices.Compact(r.Imports)
	return r, nil
}

// --- test ---

// actionJSON is one action in dry-run and policy test output.
type actionJSON = host.Action

type scenarioResultJSON struct {
	Name   string   `json:"name"`
	File   string   `json:"file"`
	Pass   bool     `json:"pass"`
	Error  string   `json:"error,omitempty"`
	Diff   []string `json:"diff"`
	Actual any      `json:"actual"`
}

type testJSON struct {
	Policy    string               `json:"policy"`
	Version   string               `json:"version"`
	Kind      string               `json:"kind"`
	Passed    int                  `json:"passed"`
	Failed    int                  `json:"failed"`
	Scenarios []scenarioResultJSON `json:"scenarios"`
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

Serial actions are compared as a set keyed by run: the order of actions in
a decision does not matter, each run gets at most one action. Verdicts are
compared in task order. An invalid decision always fails. Snapshot fields
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
		Action: func(c *cli.Context) error {
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
			files, err := scenarioFiles(c.Args().Tail())
			if err != nil {
				return asUsage(err)
			}
			var scs []scenario
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return asUsage(err)
				}
				s, err := parseScenarios(f, b)
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
			res, err := testPolicy(c.Context, sb, pol, scs)
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
		},
	}
}

// resolveArg resolves FILE|NAME, opening the store only for names.
func resolveArg(c *cli.Context, arg string) (resolvedPolicy, func(), error) {
	if looksLikeFile(arg) {
		r, err := readWasmFile(arg)
		return r, func() {}, err
	}
	st, closeFn, err := tryStore(c)
	if err != nil {
		return resolvedPolicy{}, nil, err
	}
	r, err := resolvePolicy(c.Context, st, arg)
	if err != nil {
		closeFn()
		return r, nil, err
	}
	return r, closeFn, nil
}

func actionsJSON(d abi.SerialDecision) []actionJSON { return host.Actions(d) }

// decisionProblems is host.Problems in the CLI's terms.
func decisionProblems(err error) []string {
	ps := host.Problems(err)
	for i := range ps {
		ps[i] = cliTerms(ps[i])
	}
	return ps
}

// cliTerms names the CLI's flags where a policies message names the Go
// configuration field they set.
var cliTerms = strings.NewReplacer(
	"(Config.CallTimeout)", "(--policy-timeout)",
	"Config.MemoryLimit", "--policy-memory",
	"(Config.CompileTimeout)", "(the compile deadline)",
	"(Config.InitTimeout)", "(the initialization deadline)",
).Replace

func testPolicy(ctx context.Context, sb sandbox, pol resolvedPolicy, scs []scenario) (testJSON, error) {
	rt, err := newPolicyRuntime(ctx, sb)
	if err != nil {
		return testJSON{}, err
	}
	defer rt.Close(context.Background())
	p, err := rt.Load(ctx, pol.Name, pol.Wasm)
	if err != nil {
		return testJSON{}, loadUsage(err)
	}
	defer p.Close(context.Background())
	res := testJSON{Policy: pol.label(), Version: pol.SHA256, Kind: p.Kind().String(), Scenarios: []scenarioResultJSON{}}
	for _, sc := range scs {
		r := scenarioResultJSON{Name: sc.Name, File: filepath.ToSlash(sc.File), Diff: []string{}}
		switch {
		case sc.Snap != nil && p.Kind() != abi.KindSerial, sc.Req != nil && p.Kind() != abi.KindSlotReuse:
			r.Error = fmt.Sprintf("scenario is for a %s policy, the policy is %s", map[bool]string{true: "serial", false: "slot-reuse"}[sc.Snap != nil], p.Kind())
		case sc.Snap != nil:
			d, err := p.DecideSerial(ctx, sc.Snap)
			r.Actual = actionsJSON(d)
			if err != nil {
				r.Error = strings.Join(decisionProblems(err), "; ")
			}
			r.Diff = serialDiff(sc.Want, sc.WantBelow, d)
		default:
			d, err := p.DecideReuse(ctx, sc.Req)
			vs := make([]string, 0, len(d.Verdicts))
			for _, v := range d.Verdicts {
				vs = append(vs, v.String())
			}
			r.Actual = map[string]any{"fail": d.Fail, "reason": d.Reason, "verdicts": vs}
			if err != nil {
				r.Error = strings.Join(decisionProblems(err), "; ")
			}
			if d.Fail != sc.WantReuse.Fail {
				r.Diff = append(r.Diff, fmt.Sprintf("- fail %t", sc.WantReuse.Fail), fmt.Sprintf("+ fail %t", d.Fail))
			}
			if !d.Fail && !sc.WantReuse.Fail && !slices.Equal(vs, sc.WantReuse.Verdicts) {
				r.Diff = append(r.Diff, "- verdicts ["+strings.Join(sc.WantReuse.Verdicts, " ")+"]", "+ verdicts ["+strings.Join(vs, " ")+"]")
			}
		}
		r.Pass = r.Error == "" && len(r.Diff) == 0
		if r.Pass {
			res.Passed++
		} else {
			res.Failed++
		}
		res.Scenarios = append(res.Scenarios, r)
	}
	return res, nil
}

// serialDiff compares expected and actual actions as sets keyed by run:
// "- ACTION RUN" expected but not made, "+ ACTION RUN" made but not expected.
func serialDiff(want map[string]abi.ActionKind, wantBelow uint64, d abi.SerialDecision) []string {
	got := map[string]abi.ActionKind{}
	for _, a := range d.Actions {
		got[a.Run] = a.Kind
	}
	if wantBelow != 0 || d.Below != 0 {
		want, got = maps.Clone(want), maps.Clone(got)
		if wantBelow != 0 {
			want[belowKey(wantBelow)] = abi.ActionDiscardBelow
		}
		if d.Below != 0 {
			got[belowKey(d.Below)] = abi.ActionDiscardBelow
		}
	}
	runs := make([]string, 0, len(want)+len(got))
	for r := range want {
		runs = append(runs, r)
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			runs = append(runs, r)
		}
	}
	sort.Strings(runs)
	diff := []string{}
	for _, r := range runs {
		w, wok := want[r]
		g, gok := got[r]
		if wok && gok && w == g {
			continue
		}
		if wok {
			diff = append(diff, fmt.Sprintf("- %s %s", w, r))
		}
		if gok {
			diff = append(diff, fmt.Sprintf("+ %s %s", g, r))
		}
	}
	return diff
}

func testTable(w io.Writer, res testJSON) {
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

type (
	decisionJSON = host.DecisionView
	dryRunJSON   = host.DryRun
)

func policyDryRunCommand() *cli.Command {
	return &cli.Command{
		Name:  "dry-run",
		Usage: "show what a policy would decide for a snapshot file or a live group, writing nothing",
		Description: `--policy takes a .wasm file, a built-in name (wait, discard, priority; works
with no Redis at all) or a pushed name (its active version). The snapshot is
read from --snapshot FILE (the JSON form in docs/plugin-authors.md; "-" = stdin; a scenario
file's "snapshot" also works) or from the live --group in Redis (one
read-only script; nothing is written). With --group the group's active
policy decides too, and the difference is shown (per run: active's action
vs the candidate's, "none" for no action).

Prints each action with its reason and the validation verdict. Exit 0 when
the candidate's decision is valid, 1 when it is invalid (or the policy
trapped or timed out), 2 on bad input.

Examples:
   wasmsched policy dry-run --policy priority --snapshot snap.json
   wasmsched policy dry-run --policy mypolicy.wasm --group nightly -o json`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Usage: "the candidate: `FILE|NAME`"},
			&cli.StringFlag{Name: "snapshot", Aliases: []string{"s"}, Usage: "snapshot JSON `FILE` (- = stdin)"},
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "read the live group `G` from Redis"},
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
			if (snapFile == "") == (group == "") {
				return usageErrorf("dry-run: give exactly one of --snapshot FILE and --group G")
			}
			var snap *abi.SerialSnapshot
			var st *storage.Store
			closeFn := func() {}
			if group != "" {
				if err := storage.ValidateName("group", group); err != nil {
					return asUsage(err)
				}
				st, closeFn, err = openStore(c)
				if err != nil {
					return err
				}
			} else {
				if snap, err = readSnapshotFile(snapFile); err != nil {
					return asUsage(err)
				}
				if !looksLikeFile(polArg) {
					if st, closeFn, err = tryStore(c); err != nil {
						return err
					}
				}
			}
			defer closeFn()
			res, err := dryRun(c.Context, sb, st, polArg, snap, group)
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

func (r resolvedPolicy) candidate() host.Candidate {
	return host.Candidate{Label: r.label(), Name: r.Name, SHA256: r.SHA256, Wasm: r.Wasm}
}

// decide is host.Decide with the CLI's errors: a bad module or snapshot,
// or a policy of the wrong kind, is bad input (exit 2).
func decide(ctx context.Context, rt *policies.Runtime, pol resolvedPolicy, snap *abi.SerialSnapshot) (decisionJSON, error) {
	d, err := host.Decide(ctx, rt, pol.candidate(), snap)
	switch {
	case errors.Is(err, host.ErrNotSerial):
		return d, usageErrorf("policy %s is not a serial policy; dry-run decides for serial groups (use policy test with a \"request\" scenario for slot-reuse)", pol.label())
	case errors.Is(err, policies.ErrInvalidSnapshot):
		return d, asUsage(err)
	case err != nil:
		return d, loadUsage(err)
	}
	for i := range d.Errors {
		d.Errors[i] = cliTerms(d.Errors[i])
	}
	return d, nil
}

func dryRun(ctx context.Context, sb sandbox, st *storage.Store, polArg string, snap *abi.SerialSnapshot, group string) (dryRunJSON, error) {
	if group != "" {
		sn, err := st.GetGroup(ctx, group)
		if errors.Is(err, storage.ErrNotFound) || (err == nil && sn.Policy == "") {
			return dryRunJSON{}, usageErrorf("group %s not found in namespace %s", group, st.Namespace())
		}
		if err != nil {
			return dryRunJSON{}, storeUsage(err)
		}
		if _, err := resolvePolicy(ctx, st, sn.Policy); err != nil {
			return dryRunJSON{}, fmt.Errorf("group %s: active policy: %w", group, err)
		}
	}
	cand, err := resolvePolicy(ctx, st, polArg)
	if err != nil {
		return dryRunJSON{}, err
	}
	rt, err := newPolicyRuntime(ctx, sb)
	if err != nil {
		return dryRunJSON{}, err
	}
	defer rt.Close(context.Background())
	if group == "" {
		cd, err := decide(ctx, rt, cand, snap)
		return dryRunJSON{DecisionView: cd}, err
	}
	res, err := host.DryRunGroup(ctx, rt, st, cand.candidate(), group)
	switch {
	case errors.Is(err, host.ErrUnknownGroup):
		return dryRunJSON{}, usageErrorf("group %s not found in namespace %s", group, st.Namespace())
	case errors.Is(err, host.ErrNotSerial):
		return dryRunJSON{}, usageErrorf("policy %s is not a serial policy; dry-run decides for serial groups (use policy test with a \"request\" scenario for slot-reuse)", cand.label())
	case errors.Is(err, policies.ErrInvalidSnapshot):
		return dryRunJSON{}, asUsage(err)
	case err != nil:
		return dryRunJSON{}, loadUsage(err)
	}
	for _, d := range []*decisionJSON{&res.DecisionView, res.Active} {
		for i := range d.Errors {
			d.Errors[i] = cliTerms(d.Errors[i])
		}
	}
	return res, nil
}

func decisionTable(w io.Writer, title string, d decisionJSON) {
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

func dryRunTable(w io.Writer, r dryRunJSON) {
	decisionTable(w, "CANDIDATE", r.DecisionView)
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

type versionJSON struct {
	Version  int     `json:"version"`
	SHA256   string  `json:"sha256"`
	PushedAt *string `json:"pushed_at"`
	Who      string  `json:"who"`
	Note     string  `json:"note"`
	Deleted  bool    `json:"deleted,omitempty"`
}

type eventJSON struct {
	At      *string `json:"at"`
	Who     string  `json:"who"`
	Action  string  `json:"action"`
	Version int     `json:"version"`
	Note    string  `json:"note"`
}

type policyJSON struct {
	Name     string        `json:"name"`
	Kind     string        `json:"kind"`
	Active   int           `json:"active"` // 0 = the built-in
	Builtin  bool          `json:"builtin"`
	Versions []versionJSON `json:"versions"`
	History  []eventJSON   `json:"history"`
	// AutoRollback is the last automatic rollback by a host (omitted if none).
	AutoRollback *autoRollbackJSON `json:"auto_rollback,omitempty"`
}

// autoRollbackJSON is storage.AutoRollbackInfo (to 0 = the built-in).
type autoRollbackJSON struct {
	From   int     `json:"from"`
	To     int     `json:"to"`
	At     *string `json:"at"`
	Reason string  `json:"reason"`
}

func toPolicyJSON(p storage.Policy) policyJSON {
	_, bi := plugins.Builtin(p.Name)
	out := policyJSON{Name: p.Name, Kind: p.Kind, Active: p.Active, Builtin: bi, Versions: []versionJSON{}, History: []eventJSON{}}
	if a := p.AutoRollback; a != nil {
		out.AutoRollback = &autoRollbackJSON{From: a.From, To: a.To, At: jsonTime(a.At), Reason: a.Reason}
	}
	for _, v := range p.Versions {
		out.Versions = append(out.Versions, versionJSON{Version: v.Version, SHA256: v.SHA256, PushedAt: jsonTime(v.PushedAt), Who: v.Who, Note: v.Note, Deleted: v.Deleted})
	}
	for _, e := range p.History {
		out.History = append(out.History, eventJSON{At: jsonTime(e.At), Who: e.Who, Action: e.Action, Version: e.Version, Note: e.Note})
	}
	return out
}

func builtinPolicyJSON(name string) policyJSON {
	k, _ := plugins.Kind(name)
	return policyJSON{Name: name, Kind: k.String(), Builtin: true, Versions: []versionJSON{}, History: []eventJSON{}}
}

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

type pushJSON struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	SHA256  string `json:"sha256"`
	Kind    string `json:"kind"`
	Active  bool   `json:"active"`
	Cases   int    `json:"conformance_cases"`
}

func policyPushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "gate a plugin and push it as a new version of NAME (activated unless --no-activate)",
		ArgsUsage: "NAME FILE",
		Description: `The push gate runs before anything is written: the plugin must compile,
match ABI v1, have the kind of NAME (built-ins: wait, discard and priority are
serial, reuse is slot-reuse; a new name takes the plugin's kind, later pushes
must match it), and pass a conformance run on canned snapshots (empty, only
waiting, with active runs, STOPPING, max_active 2 and 3, ...) with a valid
decision for each, within --deadline. Any failure exits 2 naming the problem,
and Redis is unchanged. Pushing bytes already pushed under NAME exits 2 and
names that version.

Activation bumps the policy generation and notifies every host (pub/sub);
each host switches on its next pass.

Examples:
   wasmsched policy push oldest-first mypolicy.wasm --note "first cut"
   wasmsched policy push priority mypriority.wasm --no-activate`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded with the version"},
			&cli.BoolFlag{Name: "no-activate", Usage: "store the version without activating it"},
			&cli.DurationFlag{Name: "deadline", Value: policies.DefaultGateDeadline, Usage: "bound of the conformance run"},
		}, sandboxFlags()...),
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 2, "NAME FILE"); err != nil {
				return err
			}
			name, file := c.Args().Get(0), c.Args().Get(1)
			if err := storage.ValidateName("policy", name); err != nil {
				return asUsage(err)
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
			if err := policies.CheckLimits(sb.config(), name, wasm); err != nil {
				return loadUsage(err)
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := pushPolicy(c.Context, sb, st, name, wasm, c.String("note"), !c.Bool("no-activate"), c.Duration("deadline"))
			if err != nil {
				return err
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

// pushPolicy gates wasm and pushes it. Nothing is written unless the gate passes.
func pushPolicy(ctx context.Context, sb sandbox, st *storage.Store, name string, wasm []byte, note string, activate bool, deadline time.Duration) (pushJSON, error) {
	want, builtin := plugins.Kind(name)
	if !builtin {
		p, err := st.GetPolicy(ctx, name)
		switch {
		case err == nil:
			k, kerr := abi.ParseKind(p.Kind)
			if kerr != nil {
				return pushJSON{}, fmt.Errorf("policy %s: registry kind: %w", name, kerr)
			}
			want = k
		case !errors.Is(err, storage.ErrNotFound):
			return pushJSON{}, err
		}
	}
	rt, err := newPolicyRuntime(ctx, sb)
	if err != nil {
		return pushJSON{}, err
	}
	defer rt.Close(context.Background())
	rep, err := policies.Gate(ctx, rt, name, wasm, policies.GateOptions{Kind: want, Deadline: deadline})
	if err != nil {
		return pushJSON{}, loadUsage(fmt.Errorf("push %s refused, nothing written: %w", name, err))
	}
	v, err := st.PushPolicy(ctx, storage.PushRequest{Name: name, Kind: rep.Kind.String(), Who: whoAmI(), Note: note, Blob: wasm, Activate: activate})
	if errors.Is(err, storage.ErrDuplicate) {
		return pushJSON{}, usageErrorf("push %s refused: these bytes (sha256 %s) are already version %d; use policy activate %s %d", name, digest.Short(rep.SHA256), v.Version, name, v.Version)
	}
	if err != nil {
		return pushJSON{}, storeUsage(err)
	}
	return pushJSON{Name: name, Version: v.Version, SHA256: v.SHA256, Kind: rep.Kind.String(), Active: activate, Cases: rep.Cases}, nil
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
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			ps, err := listPolicies(c.Context, st, c.Args().First())
			if err != nil {
				return err
			}
			return render(c, ps, func(w io.Writer) { policyTable(w, ps) })
		},
	}
}

func listPolicies(ctx context.Context, st *storage.Store, name string) ([]policyJSON, error) {
	if name != "" {
		p, err := st.GetPolicy(ctx, name)
		if errors.Is(err, storage.ErrNotFound) {
			if _, ok := plugins.Builtin(name); ok {
				return []policyJSON{builtinPolicyJSON(name)}, nil
			}
			return nil, usageErrorf("policy %s not found in namespace %s", name, st.Namespace())
		}
		if err != nil {
			return nil, storeUsage(err)
		}
		return []policyJSON{toPolicyJSON(p)}, nil
	}
	ps, err := st.ListPolicies(ctx)
	if err != nil {
		return nil, err
	}
	out := []policyJSON{}
	seen := map[string]bool{}
	for _, p := range ps {
		out = append(out, toPolicyJSON(p))
		seen[p.Name] = true
	}
	for _, n := range plugins.Names() {
		if !seen[n] {
			out = append(out, builtinPolicyJSON(n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func policyTable(w io.Writer, ps []policyJSON) {
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
				sha, derefDash(v.PushedAt), dash(v.Who), dash(v.Note))
		}
	}
	for _, p := range ps {
		if a := p.AutoRollback; a != nil {
			to := strconv.Itoa(a.To)
			if a.To == 0 {
				to = "the built-in"
			}
			fmt.Fprintf(w, "\n%s: auto-rolled back from version %d to %s at %s: %s\n", p.Name, a.From, to, derefDash(a.At), a.Reason)
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
		Usage:     "make a pushed version of NAME active",
		ArgsUsage: "NAME VERSION",
		Description: `VERSION is a version number (as in policy list) or a unique sha256 prefix
(at least 8 hex digits). Every host switches on its next pass.

Examples:
   wasmsched policy activate oldest-first 2
   wasmsched policy activate oldest-first 3fa2b9c01d`,
		Flags: []cli.Flag{&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded in the history"}},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 2, "NAME VERSION"); err != nil {
				return err
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			name := c.Args().Get(0)
			p, err := st.GetPolicy(c.Context, name)
			if err != nil {
				return storeUsage(err)
			}
			ver, err := parseVersionArg(p, c.Args().Get(1))
			if err != nil {
				return err
			}
			if err := st.ActivatePolicy(c.Context, name, ver, whoAmI(), c.String("note")); err != nil {
				return storeUsage(err)
			}
			res := activeJSON{Name: name, Active: ver, SHA256: p.Versions[ver-1].SHA256,
				Message: fmt.Sprintf("policy %s: version %d is active", name, ver)}
			return render(c, res, func(w io.Writer) { fmt.Fprintln(w, res.Message) })
		},
	}
}

func parseVersionArg(p storage.Policy, s string) (int, error) {
	if n, err := strconv.Atoi(strings.TrimPrefix(s, "v")); err == nil {
		if n < 1 || n > len(p.Versions) {
			return 0, usageErrorf("policy %s has no version %d (versions 1..%d)", p.Name, n, len(p.Versions))
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
			if err := storage.ValidateName("policy", name); err != nil {
				return asUsage(err)
			}
			v := c.Int("version")
			if c.IsSet("version") && v < 1 {
				return usageErrorf("--version must be >= 1, got %d", v)
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			n, err := st.DeletePolicy(c.Context, name, v, whoAmI(), c.String("note"))
			if err != nil {
				return storeUsage(err)
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
		Description: `Activations form a stack: rolling back twice goes two steps back. With no
earlier active version, exit 2. Every host switches on its next pass.

Examples:
   wasmsched policy rollback oldest-first --note "v3 starves group nightly"`,
		Flags: []cli.Flag{&cli.StringFlag{Name: "note", Usage: "free `TEXT` recorded in the history"}},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "NAME"); err != nil {
				return err
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			name := c.Args().First()
			v, err := st.RollbackPolicy(c.Context, name, whoAmI(), c.String("note"))
			if err != nil {
				return storeUsage(err)
			}
			res := activeJSON{Name: name, Active: v.Version, SHA256: v.SHA256,
				Message: fmt.Sprintf("policy %s: rolled back to version %d", name, v.Version)}
			return render(c, res, func(w io.Writer) { fmt.Fprintln(w, res.Message) })
		},
	}
}
