package plugins

import (
	"embed"
	"slices"

	"github.com/wasmsched/wasmsched/abi"
)

// The built-in policies, each built from plugins/<name> with the command in
// README.md (TestCommittedWasmIsReproducible checks the bytes).
//
//go:embed wait/wait.wasm discard/discard.wasm priority/priority.wasm reuse/reuse.wasm
//go:embed fifo/fifo.wasm fair/fair.wasm priority-first/priority-first.wasm
var builtin embed.FS

// Policy is one built-in policy: its name, the kind it decides and its
// module.
type Policy struct {
	Name string
	Kind abi.Kind
	Wasm []byte // shared: do not modify
}

// table is the one list of built-ins, by name.
var table = func() []Policy {
	out := []Policy{
		{Name: "discard", Kind: abi.KindSerial},
		{Name: "fair", Kind: abi.KindAllocation},
		{Name: "fifo", Kind: abi.KindAllocation},
		{Name: "priority", Kind: abi.KindSerial},
		{Name: "priority-first", Kind: abi.KindAllocation},
		{Name: "reuse", Kind: abi.KindSlotReuse},
		{Name: "wait", Kind: abi.KindSerial},
	}
	for i := range out {
		b, err := builtin.ReadFile(out[i].Name + "/" + out[i].Name + ".wasm")
		if err != nil {
			panic(err)
		}
		out[i].Wasm = b
	}
	return out
}()

// Lookup returns the built-in policy name: "wait", "discard", "priority"
// (serial), "reuse" (slot-reuse), "fifo", "fair" or "priority-first"
// (allocation). A pushed version under a built-in's
// name must have its kind.
func Lookup(name string) (Policy, bool) {
	i := slices.IndexFunc(table, func(p Policy) bool { return p.Name == name })
	if i < 0 {
		return Policy{}, false
	}
	return table[i], true
}

// All returns the built-in policies, sorted by name.
func All() []Policy { return slices.Clone(table) }

// Builtin returns the embedded wasm of a built-in policy. The slice is
// shared: do not modify it.
func Builtin(name string) ([]byte, bool) {
	p, ok := Lookup(name)
	return p.Wasm, ok
}

// Names returns the names of the built-in policies, sorted.
func Names() []string {
	out := make([]string, len(table))
	for i, p := range table {
		out[i] = p.Name
	}
	return out
}
