package policies

// Static limits on a plugin module, checked by Load before anything
// decodes, validates or compiles the module (and so at push, and on every
// host that loads a pushed version). A module over one is refused with
// ErrLimit, naming the limit and the module's value. The module size limit
// is Config.MaxModuleSize; the others are fixed. Each is far above what the
// built-in Go plugins need (in parentheses: a built-in's value), and low
// enough that decoding, validating and compiling a module within them
// takes bounded memory; compile time is also bounded by
// Config.CompileTimeout.
const (
	DefaultMaxModuleSize = 8 << 20 // bytes (2.6 MiB)
	maxFunctions         = 50_000  // functions, imported and defined (1,840)
	maxBodySize          = 1 << 20 // bytes of one function body (29 KiB)
	maxLocals            = 10_000  // locals declared by one function (17)
	maxTotalLocals       = 500_000 // locals declared by all functions (7,224)
	maxNestingDepth      = 2_048   // block/loop/if nesting in one function (549)
	maxTables            = 4       // tables (1)
	maxTableSize         = 100_000 // a table's initial size, and its maximum if table.grow is used (5,920)
	maxMemories          = 1       // memories (1)
	maxGlobals           = 10_000  // globals (8)
	maxTypes             = 10_000  // function types (14)
	maxTypeArity         = 256     // parameters plus results of one function type
	maxImports           = 1_000   // imports, all WASI functions (16)
	maxExports           = 10_000  // exports (6)
	maxDataSegments      = 100_000 // data segments (31,478)
	maxElemSegments      = 1_000   // element segments (1)
	maxElements          = 100_000 // elements of all element segments (1,824)
	maxCustomSections    = 1_000   // custom sections (2)
)

// CheckLimits checks wasm against the static limits of cfg (zero fields:
// defaults) without compiling anything: nil, or an error wrapping ErrLimit
// (a limit exceeded, named with the module's value) or ErrNotWasm (bytes
// that do not decode). Load calls it first; the CLI's push calls it before
// it contacts Redis.
func CheckLimits(cfg Config, name string, wasm []byte) error {
	if err := checkMagic(name, wasm); err != nil {
		return err
	}
	_, err := checkLimits(cfg.withDefaults(), name, wasm)
	return err
}
