package policytool

import (
	"context"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/internal/digest"
)

type Export struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"` // func, memory, global, table
	Params  []string `json:"params,omitempty"`
	Results []string `json:"results,omitempty"`
}

type InspectResult struct {
	File       string `json:"file"`
	Size       int    `json:"size"`
	SHA256     string `json:"sha256"`
	ABIVersion int    `json:"abi_version"`
	Kind       string `json:"kind"`
	// Language is the source language the module says (the SDK's
	// "wasmsched_sdk" custom section: "c", "rust"; "go" for a Go build's
	// go:buildid section), "" when it says none.
	Language string   `json:"language"`
	Exports  []Export `json:"exports"`
	Imports  []string `json:"imports"`
	// Params are the group parameters it declares (abi/params), omitted
	// when it declares none
	Params []ParamOut `json:"params,omitempty"`
}

// ParamOut is one declared parameter.
type ParamOut struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Default string `json:"default,omitempty"`
	Min     string `json:"min,omitempty"`
	Max     string `json:"max,omitempty"`
	Doc     string `json:"doc,omitempty"`
}

func Inspect(ctx context.Context, path string) (InspectResult, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return InspectResult{}, badinput.Wrap(err)
	}
	r := InspectResult{File: path, Size: len(wasm), SHA256: digest.SHA256(wasm), Exports: []Export{}, Imports: []string{}}
	rt, err := NewRuntime(ctx, Sandbox{})
	if err != nil {
		return r, err
	}
	defer rt.Close(context.Background())
	// Load first: it gives the precise message for non-wasm bytes, wrong
	// exports, ABI version and kind.
	p, err := rt.Load(ctx, path, wasm)
	if err != nil {
		return r, LoadError(err)
	}
	r.Kind = p.Kind().String()
	r.ABIVersion = int(p.ABIVersion())
	for _, d := range p.Params() {
		r.Params = append(r.Params, ParamOut{Name: d.Name, Type: string(d.Type), Default: d.Default, Min: d.Min, Max: d.Max, Doc: d.Doc})
	}
	_ = p.Close(ctx)

	wr := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCustomSections(true))
	defer wr.Close(context.Background())
	cm, err := wr.CompileModule(ctx, wasm)
	if err != nil {
		return r, badinput.Errorf("inspect %s: %v", path, err)
	}
	for _, cs := range cm.CustomSections() {
		switch {
		case cs.Name() == "wasmsched_sdk" && len(cs.Data()) <= 32:
			r.Language = strings.ToValidUTF8(string(cs.Data()), "?")
		case cs.Name() == "go:buildid" && r.Language == "":
			r.Language = "go"
		}
	}
	types := func(ts []api.ValueType) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = api.ValueTypeName(t)
		}
		return out
	}
	for name, f := range cm.ExportedFunctions() {
		r.Exports = append(r.Exports, Export{Name: name, Type: "func", Params: types(f.ParamTypes()), Results: types(f.ResultTypes())})
	}
	for name := range cm.ExportedMemories() {
		r.Exports = append(r.Exports, Export{Name: name, Type: "memory"})
	}
	sort.Slice(r.Exports, func(i, j int) bool { return r.Exports[i].Name < r.Exports[j].Name })
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		r.Imports = append(r.Imports, mod+"."+name)
	}
	sort.Strings(r.Imports)
	r.Imports = slices.Compact(r.Imports)
	return r, nil
}

// --- test ---
