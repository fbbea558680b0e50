package policies

import "github.com/wasmsched/wasmsched/plugins"

// Builtin returns the embedded wasm of a built-in policy (wait, discard,
// priority, reuse); see package plugins.
func Builtin(name string) ([]byte, bool) { return plugins.Builtin(name) }

// BuiltinNames returns the built-in policy names, sorted.
func BuiltinNames() []string { return plugins.Names() }
