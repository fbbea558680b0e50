package tests

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestImports_arrows: the import arrows of docs/architecture.md hold:
// abi on the standard library only (it is compiled into plugins), the
// codec on abi only, the input rules (internal/limits) on abi and
// internal/errs only, storage below everything of ours but digest and abi's
// plain types, client on storage (and abi's types) only (applications pull
// in no wasm runtime), policies below
// host, client and the built-ins, and nothing imports a command.
func TestImports_arrows(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/wasmsched/wasmsched"
	type pkg struct {
		ImportPath string
		Imports    []string
	}
	rules := map[string][]string{ // package -> the only packages of ours it may import
		"abi":               {},
		"internal/abicodec": {"abi"},
		"storage":           {"abi", "internal/digest", "internal/errs", "internal/keyspace", "internal/limits", "internal/testhooks", "internal/tracing"},
		"client":            {"storage", "abi", "internal/digest", "internal/errs", "internal/limits", "internal/tracing"},
		"internal/tracing":  {},
		"internal/limits":   {"abi", "internal/errs"},
		"internal/errs":     {},
		"policies":          {"abi", "abi/params", "internal/abicodec", "internal/digest", "policies/internal/wasmrewrite"},
		"plugins":           {"abi"},
		"abi/sdk":           {"abi", "internal/abicodec"},
		"abi/params":        {"abi"},
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		allowed, ruled := rules[name]
		if ruled {
			seen++
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
			if strings.HasPrefix(dep, "cmd/") && !strings.HasPrefix(name, "cmd/") {
				t.Errorf("%s imports the command package %s", name, dep)
			}
			if ruled && !contains(allowed, dep) {
				t.Errorf("%s imports %s; it may import only %v of ours", name, dep, allowed)
			}
		}
	}
	if seen != len(rules) {
		t.Fatalf("found %d of the %d ruled packages: did one move?", seen, len(rules))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
