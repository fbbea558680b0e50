package policytool

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// Sandbox is the policy sandbox of one CLI command (the CLI's sandbox
// flags); the zero value is the runtime's defaults.
type Sandbox struct {
	Timeout       time.Duration // --policy-timeout
	Memory        uint64        // --policy-memory
	MaxModuleSize uint64        // --max-module-size
}

// Config is the runtime configuration of the sandbox.
func (sb Sandbox) Config() policies.Config {
	return policies.Config{Logger: quietLogger, PoolSize: 1, CallTimeout: sb.Timeout, MemoryLimit: sb.Memory, MaxModuleSize: sb.MaxModuleSize}
}

// NewRuntime returns a runtime for one CLI command (compilation cache
// in the user cache dir, or none if WASMSCHED_NO_CACHE is set).
func NewRuntime(ctx context.Context, sb Sandbox) (*policies.Runtime, error) {
	cfg := sb.Config()
	if os.Getenv("WASMSCHED_NO_CACHE") != "" {
		cfg.CacheDir = "-"
	} else if _, err := policies.DefaultCacheDir(); err != nil {
		cfg.CacheDir = "-"
	}
	return policies.NewRuntime(ctx, cfg)
}

// LoadError marks load and gate errors (bad plugin bytes) as bad input,
// in the CLI's terms.
func LoadError(err error) error {
	if err != nil {
		err = &termsError{err}
	}
	for _, s := range []error{policies.ErrNotWasm, policies.ErrABIVersion, policies.ErrMissingExport,
		policies.ErrKind, policies.ErrInstantiate, policies.ErrConformance, policies.ErrLimit, policies.ErrCompileTimeout} {
		if errors.Is(err, s) {
			return badinput.Wrap(err)
		}
	}
	return err
}

// termsError is err with Terms applied to its message.
type termsError struct{ err error }

func (e *termsError) Error() string { return Terms(e.err.Error()) }

func (e *termsError) Unwrap() error { return e.err }

// --- resolving FILE|NAME ---

// Policy is a policy module and where it came from: a file, a built-in
// or the registry (Source).
type Policy struct {
	host.Module
	Source string // file, builtin, registry
}

// LooksLikeFile reports whether a FILE|NAME argument names a file: it ends
// in .wasm, has a path separator, or is an existing file.
func LooksLikeFile(arg string) bool {
	if strings.HasSuffix(arg, ".wasm") || strings.ContainsRune(arg, os.PathSeparator) {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && !fi.IsDir()
}

// ReadWasmFile reads a plugin file (its name and label are its path).
func ReadWasmFile(path string) (Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, badinput.Wrap(err)
	}
	return Policy{Module: host.Module{Name: path, Label: path, SHA256: digest.SHA256(b), Wasm: b}, Source: "file"}, nil
}

// Resolve reads a policy given as FILE or NAME. st may be nil (no
// Redis): then only files and built-ins resolve.
func Resolve(ctx context.Context, st *storage.Store, arg string) (Policy, error) {
	if LooksLikeFile(arg) {
		return ReadWasmFile(arg)
	}
	if err := limits.ValidateName("policy", arg); err != nil {
		return Policy{}, badinput.Wrap(err)
	}
	m, err := host.ResolvePolicy(ctx, st, arg) // the hosts' resolver
	switch {
	case errors.Is(err, host.ErrUnknownPolicy) && st == nil:
		return Policy{}, badinput.Errorf("policy %q: no such file and not a built-in (%s); Redis is unreachable, so pushed policies cannot be read",
			arg, strings.Join(plugins.Names(), ", "))
	case errors.Is(err, host.ErrUnknownPolicy) && strings.Contains(err.Error(), "is held"):
		return Policy{}, badinput.Wrap(err)
	case errors.Is(err, host.ErrUnknownPolicy):
		return Policy{}, badinput.Errorf("policy %q: no such file, not a built-in (%s) and no active version in namespace %s",
			arg, strings.Join(plugins.Names(), ", "), st.Namespace())
	case err != nil:
		return Policy{}, err
	}
	if m.Registry == 0 {
		return Policy{Module: m, Source: "builtin"}, nil
	}
	return Policy{Module: m, Source: "registry"}, nil
}

// decisionProblems is policies.Problems in the CLI's terms.
func decisionProblems(err error) []string {
	ps := policies.Problems(err)
	for i := range ps {
		ps[i] = Terms(ps[i])
	}
	return ps
}

// Terms names the CLI's flags where a policies message names the Go
// configuration field they set.
var Terms = strings.NewReplacer(
	"(Config.CallTimeout)", "(--policy-timeout)",
	"Config.MemoryLimit", "--policy-memory",
	"(Config.CompileTimeout)", "(the compile deadline)",
	"(Config.InitTimeout)", "(the initialization deadline)",
).Replace

// quietLogger drops the runtime's own warnings: the CLI reports errors itself.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))
