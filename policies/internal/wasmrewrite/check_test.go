package wasmrewrite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wasmsched/wasmsched/policies/internal/wasmgen"
)

// small limits, so the table cases stay small
var testLimits = Limits{
	ModuleSize: 1 << 20, Functions: 100, BodySize: 4096, Locals: 50, TotalLocals: 200, NestingDepth: 16,
	Tables: 2, TableSize: 64, Memories: 1, Globals: 10, Types: 10, TypeArity: 8, Imports: 4, Exports: 10,
	DataSegments: 10, ElemSegments: 4, Elements: 64, CustomSections: 4,
}

func TestCheck_limits(t *testing.T) {
	fn := func(n int, locals [][2]uint32, code []byte) []byte {
		return wasmgen.Funcs(n, wasmgen.Body(locals, code))
	}
	end := []byte{0x0B}
	cases := []struct {
		name  string
		wasm  []byte
		limit string // "" = accepted
		where string
	}{
		{"ok", fn(3, [][2]uint32{{10, 0x7F}}, wasmgen.Nested(16)), "", ""},
		{"size", append(fn(1, nil, end), wasmgen.Custom("x", 1<<20)...), "MaxModuleSize", ""},
		{"functions", fn(101, nil, end), "MaxFunctions", ""},
		{"locals", fn(1, [][2]uint32{{30, 0x7F}, {21, 0x7E}}, end), "MaxLocals", "function 0"},
		{"locals 2^32-1", fn(1, [][2]uint32{{1<<32 - 1, 0x7F}}, end), "MaxLocals", "function 0"},
		{"total locals", fn(5, [][2]uint32{{41, 0x7F}}, end), "MaxTotalLocals", ""},
		{"nesting", fn(2, nil, wasmgen.Nested(17)), "MaxNestingDepth", "function 0"},
		{"body", fn(1, nil, append(make([]byte, 4096), 0x0B)), "MaxBodySize", "function 0"},
		{"custom sections", wasmgen.Module(wasmgen.Custom("a", 0), wasmgen.Custom("b", 0), wasmgen.Custom("c", 0), wasmgen.Custom("d", 0), wasmgen.Custom("e", 0)), "MaxCustomSections", ""},
		{"table min", wasmgen.Module(wasmgen.Section(4, wasmgen.Vec([]byte{0x70, 0x00, 65}))), "MaxTableSize", "table 0 (initial size)"},
		{"table.grow without max", wasmgen.Module(
			wasmgen.Section(1, wasmgen.Vec([]byte{0x60, 0, 0})),
			wasmgen.Section(3, wasmgen.Vec([]byte{0})),
			wasmgen.Section(4, wasmgen.Vec([]byte{0x70, 0x00, 1})),
			wasmgen.Section(10, wasmgen.Vec(wasmgen.Body(nil, []byte{0xD0, 0x70, 0x41, 0x01, 0xFC, 15, 0, 0x1A, 0x0B})))), "MaxTableSize", "table 0"},
		{"table.grow with max", wasmgen.Module(
			wasmgen.Section(1, wasmgen.Vec([]byte{0x60, 0, 0})),
			wasmgen.Section(3, wasmgen.Vec([]byte{0})),
			wasmgen.Section(4, wasmgen.Vec([]byte{0x70, 0x01, 1, 64})),
			wasmgen.Section(10, wasmgen.Vec(wasmgen.Body(nil, []byte{0xD0, 0x70, 0x41, 0x01, 0xFC, 15, 0, 0x1A, 0x0B})))), "", ""},
		{"arity", wasmgen.Module(wasmgen.Section(1, wasmgen.Vec([]byte{0x60, 9, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0}))), "MaxTypeArity", "type 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check(c.wasm, testLimits)
			var le *LimitError
			if c.limit == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &le) || le.Limit != c.limit || !strings.HasPrefix(le.Where, c.where) {
				t.Fatalf("err = %v, want %s at %q", err, c.limit, c.where)
			}
			if !strings.Contains(err.Error(), c.limit) {
				t.Fatalf("message %q does not name %s", err, c.limit)
			}
		})
	}
}

// TestCheck_committedModules: every committed module passes the real
// limits, except the hostile ones written to exceed them.
func TestCheck_committedModules(t *testing.T) {
	real := Limits{8 << 20, 50_000, 1 << 20, 10_000, 500_000, 2_048, 4, 100_000, 1, 10_000, 10_000, 256, 1_000, 10_000, 100_000, 1_000, 100_000, 1_000}
	for _, f := range committedWasm(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Check(b, real)
		switch base := filepath.Base(f); base {
		case "table-grow.wasm", "table-huge.wasm":
			if err == nil {
				t.Errorf("%s accepted", base)
			}
		default:
			if err != nil {
				t.Errorf("%s: %v", base, err)
			}
		}
	}
}

// FuzzCheck: Check never panics, its work is linear in the input (the
// fuzzer's per-input timeout catches worse), and whatever it accepts the
// rewriter handles without panicking, and wazero decodes without running
// out of memory or panicking.
func FuzzCheck(f *testing.F) {
	for _, p := range committedWasm(f) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Add(wasmgen.Funcs(2, wasmgen.Body([][2]uint32{{3, 0x7F}}, wasmgen.Nested(5))))
	f.Add(wasmgen.Funcs(1, wasmgen.Body([][2]uint32{{1<<32 - 1, 0x7F}}, []byte{0x0B})))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithMemoryLimitPages(16))
	f.Cleanup(func() { _ = rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Check(b, testLimits)
		if err != nil {
			return
		}
		if info.MaxLocals > testLimits.Locals || info.MaxNesting > testLimits.NestingDepth || info.Functions > testLimits.Functions {
			t.Fatalf("accepted beyond the limits: %+v", info)
		}
		_, _, _ = Rewrite(b)
		if m, err := rt.CompileModule(ctx, b); err == nil {
			_ = m.Close(ctx)
		}
	})
}
