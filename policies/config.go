package policies

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/wasmsched/wasmsched/policies/internal/wasmrewrite"
)

// Defaults applied to zero Config fields.
const (
	DefaultMemoryLimit = 32 << 20
	DefaultCallTimeout = 50 * time.Millisecond
	defaultInitTimeout = 5 * time.Second
	// defaultCompileTimeout bounds validating and compiling one module: a
	// backstop against a module within the static limits that still
	// compiles slowly, not a performance budget (a cold compile of a Go
	// plugin takes 1.2 s on an idle core and over 5 s under the race
	// detector or on a loaded machine).
	defaultCompileTimeout = 30 * time.Second
	defaultStderrLimit    = 4 << 10
	MinMemoryLimit        = 8 << 20 // a Go guest needs ~52 pages after _initialize and GC headroom
	// DefaultGateDeadline bounds a conformance run (all canned cases
	// together, after compilation): GateOptions.Deadline.
	DefaultGateDeadline = 2 * time.Second
	// MaxReasonLen bounds a reason string in a decision.
	MaxReasonLen        = 256
	wasmPageSize        = 64 << 10
	maxMemoryLimitPages = 65536
)

// Config configures a Runtime. The zero value is usable.
type Config struct {
	// MemoryLimit caps each instance's linear memory, in bytes (rounded down
	// to 64 KiB pages). 0 = DefaultMemoryLimit (32 MiB).
	MemoryLimit uint64
	// CallTimeout is the deadline of one decide call. 0 = DefaultCallTimeout.
	CallTimeout time.Duration
	// InitTimeout bounds instantiation (the guest's _initialize).
	// 0 = defaultInitTimeout.
	InitTimeout time.Duration
	// PoolSize is the maximum number of instances per policy version, i.e.
	// concurrent calls. 0 = GOMAXPROCS.
	PoolSize int
	// CacheDir is the wazero compilation cache directory.
	// "" = os.UserCacheDir()/wasmsched/wazero; "-" = no file cache.
	CacheDir string
	// Logger receives call failures with the guest's output. nil = slog.Default().
	Logger *slog.Logger
	// StderrLimit bounds the captured guest stdout+stderr per instance (a
	// ring keeping the latest bytes). 0 = defaultStderrLimit (4 KiB).
	StderrLimit int
	// MaxModuleSize bounds a module's size in bytes; Load refuses a larger
	// one with ErrLimit before decoding it. 0 = DefaultMaxModuleSize
	// (8 MiB). The other static limits are constants (limits.go).
	MaxModuleSize uint64
	// CompileTimeout bounds validating and compiling one module at Load
	// (ErrCompileTimeout); a cached compilation is much faster. 0 =
	// defaultCompileTimeout (30 s).
	CompileTimeout time.Duration
	// Termination selects how a call's deadline stops a running guest:
	// TerminationInline ("" or "inline", the default) instruments the module
	// at load with a stop flag checked at every function entry and loop
	// header, set by a timer; TerminationWazero ("wazero") uses wazero's
	// WithCloseOnContextDone (a watcher goroutine per call and an exit to Go
	// at every check: about twice as slow). See README.md.
	Termination string
}

// Termination modes (Config.Termination).
const (
	TerminationInline = "inline"
	TerminationWazero = "wazero"
)

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MemoryLimit != 0 && c.MemoryLimit < MinMemoryLimit:
		return fmt.Errorf("policies: MemoryLimit %d below the minimum %d (a Go guest needs it)", c.MemoryLimit, MinMemoryLimit)
	case c.MemoryLimit/wasmPageSize > maxMemoryLimitPages:
		return fmt.Errorf("policies: MemoryLimit %d above 4 GiB", c.MemoryLimit)
	case c.CallTimeout < 0:
		return fmt.Errorf("policies: negative CallTimeout %v", c.CallTimeout)
	case c.InitTimeout < 0:
		return fmt.Errorf("policies: negative InitTimeout %v", c.InitTimeout)
	case c.CompileTimeout < 0:
		return fmt.Errorf("policies: negative CompileTimeout %v", c.CompileTimeout)
	case c.PoolSize < 0:
		return fmt.Errorf("policies: negative PoolSize %d", c.PoolSize)
	case c.StderrLimit < 0:
		return fmt.Errorf("policies: negative StderrLimit %d", c.StderrLimit)
	case c.Termination != "" && c.Termination != TerminationInline && c.Termination != TerminationWazero:
		return fmt.Errorf("policies: Termination %q, want %q or %q", c.Termination, TerminationInline, TerminationWazero)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.InitTimeout == 0 {
		c.InitTimeout = defaultInitTimeout
	}
	if c.MaxModuleSize == 0 {
		c.MaxModuleSize = DefaultMaxModuleSize
	}
	if c.CompileTimeout == 0 {
		c.CompileTimeout = defaultCompileTimeout
	}
	if c.PoolSize == 0 {
		c.PoolSize = runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.StderrLimit == 0 {
		c.StderrLimit = defaultStderrLimit
	}
	if c.Termination == "" {
		c.Termination = TerminationInline
	}
	return c
}

// limits returns the static limits with the configured module size.
func (c Config) limits() wasmrewrite.Limits {
	return wasmrewrite.Limits{
		ModuleSize: c.MaxModuleSize, Functions: maxFunctions, BodySize: maxBodySize, Locals: maxLocals,
		TotalLocals: maxTotalLocals, NestingDepth: maxNestingDepth, Tables: maxTables, TableSize: maxTableSize,
		Memories: maxMemories, Globals: maxGlobals, Types: maxTypes, TypeArity: maxTypeArity, Imports: maxImports,
		Exports: maxExports, DataSegments: maxDataSegments, ElemSegments: maxElemSegments, Elements: maxElements,
		CustomSections: maxCustomSections,
	}
}
