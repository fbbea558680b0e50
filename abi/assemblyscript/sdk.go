// Package assdk holds the AssemblyScript SDK (index.ts, the package
// "wasmsched") for tools: `wasmsched policy build` of an AssemblyScript
// plugin puts it on the compiler's package path. AssemblyScript authors use
// the file itself (docs/sdk-assemblyscript.md).
package assdk

import _ "embed"

// Source is index.ts.
//
//go:embed index.ts
var Source []byte

// CompilerVersion is the AssemblyScript compiler the SDK is built and
// tested with (package.json, pinned by package-lock.json).
const CompilerVersion = "0.28.20"

// Flags are the compiler flags of a plugin build, after the entry file,
// the package path and the output: a release build with the stub runtime
// (nothing is freed: the SDK allocates nothing per call), the start
// function exported as _initialize (the host calls it once per instance),
// and AssemblyScript's env imports (abort, trace, seed) replaced by the
// SDK's, so the module imports only WASI's fd_write.
var Flags = []string{"-O3", "--runtime", "stub", "--exportStart", "_initialize",
	"--use", "abort=~lib/wasmsched/index/wsAbort", "--use", "trace=~lib/wasmsched/index/wsTrace",
	"--use", "seed=~lib/wasmsched/index/wsSeed"}
