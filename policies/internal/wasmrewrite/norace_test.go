//go:build !race

package wasmrewrite

const raceEnabled = false
