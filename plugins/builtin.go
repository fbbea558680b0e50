package plugins

import (
	"embed"
	"slices"
)

// The built-in policies, each built from plugins/<name> with the command in
// README.md (TestCommittedWasmIsReproducible checks the bytes).
//
//go:embed wait/wait.wasm discard/discard.wasm priority/priority.wasm reuse/reuse.wasm
var builtin embed.FS

var names = []string{"discard", "priority", "reuse", "wait"}

// Builtin returns the embedded wasm of a built-in policy: "wait", "discard",
// "priority" (serial) or "reuse" (slot-reuse). The slice is shared: do not
// modify it.
func Builtin(name string) ([]byte, bool) {
	if !slices.Contains(names, name) {
		return nil, false
	}
	b, err := builtin.ReadFile(name + "/" + name + ".wasm")
	return b, err == nil
}

// Names returns the names of the built-in policies, sorted.
func Names() []string { return slices.Clone(names) }
