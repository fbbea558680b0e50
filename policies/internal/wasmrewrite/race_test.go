//go:build race

package wasmrewrite

// raceEnabled: the race detector instruments wazero's compiler too, which
// makes compiling a Go plugin about 15 s; the tests that compile every
// committed module compile only the small ones then (the run without the
// race detector compiles them all).
const raceEnabled = true
