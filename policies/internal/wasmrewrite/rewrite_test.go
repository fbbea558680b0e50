package wasmrewrite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// committedWasm lists every committed .wasm in the repository.
func committedWasm(tb testing.TB) []string {
	tb.Helper()
	root := "../../.."
	var files []string
	for _, g := range []string{"plugins/*/*.wasm", "policies/testdata/*.wasm", "policies/testdata/*/*.wasm", "tests/testdata/*/*.wasm", "cmd/wasmsched/testdata/*/*/*.wasm"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		tb.Fatalf("found only %d .wasm files: %v", len(files), files)
	}
	return files
}

func TestRewriteCommittedModulesCompile(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer rt.Close(ctx)
	for _, f := range committedWasm(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, st, err := Rewrite(in)
			if raceEnabled && len(in) > 256<<10 {
				t.Skip("a large module: compiled by the run without the race detector")
			}
			if strings.HasPrefix(filepath.Base(f), "escape-") {
				// invalid on purpose: they name globals, functions or
				// exports they do not declare, which the injected ones
				// would become
				if err == nil {
					t.Fatalf("rewrite accepted %s", f)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Functions == 0 {
				t.Fatalf("no function instrumented: %+v", st)
			}
			cm, err := rt.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("rewritten module does not compile: %v", err)
			}
			defer cm.Close(ctx)
			// idempotence guard: rewriting twice is refused (export exists)
			if _, _, err := Rewrite(out); err == nil {
				t.Fatalf("second rewrite accepted")
			}
			t.Logf("%d -> %d bytes, %+v", len(in), len(out), st)
		})
	}
}

func TestRewriteRefusesUnknownOpcode(t *testing.T) {
	// (module (func)) with a SIMD v128.const in the body
	m := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type () -> ()
		"\x03\x02\x01\x00" + // func 0: type 0
		"\x0a\x06\x01\x04\x00\xfd\x0c\x0b") // code: body with 0xFD
	_, _, err := Rewrite(m)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

func TestRewriteMinimalModuleAddsSections(t *testing.T) {
	// (module (func (loop (br 0))))  no global or export section
	m := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" +
		"\x03\x02\x01\x00" +
		"\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b")
	out, st, err := Rewrite(m)
	if err != nil {
		t.Fatal(err)
	}
	if st.Loops != 1 || st.Functions != 1 || st.StopGlobal != 0 || st.BudgetGlobal != 1 || st.YieldFunc != 1 || !st.AddedMemory {
		t.Fatalf("stats %+v", st)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, out); err != nil {
		t.Fatal(err)
	}
}

func FuzzRewrite(f *testing.F) {
	for _, p := range committedWasm(f) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := Rewrite(b)
		if err == nil && len(out) < len(b)-1<<20 {
			t.Fatalf("output shrank unexpectedly")
		}
	})
}

// BenchmarkRewrite: the cost added to Load (once per policy version).
func BenchmarkRewrite(b *testing.B) {
	in, err := os.ReadFile("../../../plugins/priority/priority.wasm")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, _, err := Rewrite(in); err != nil {
			b.Fatal(err)
		}
	}
}
