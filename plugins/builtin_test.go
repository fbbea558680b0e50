package plugins_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/plugins/internal/cases"
)

func TestMain(m *testing.M) { cases.Main(m) }

func TestNames(t *testing.T) {
	if got := fmt.Sprint(plugins.Names()); got != "[discard fair fifo priority priority-first reuse wait]" {
		t.Fatal(got)
	}
	for _, n := range plugins.Names() {
		if b, ok := plugins.Builtin(n); !ok || !bytes.HasPrefix(b, []byte("\x00asm")) {
			t.Fatalf("%s: %v", n, ok)
		}
	}
	if _, ok := plugins.Builtin("wat-wait"); ok {
		t.Fatal("wat-wait is not a built-in")
	}
}

// The WAT wait plugin goes through the same host path and the same table as
// the Go wait plugin, with identical results (reasons included).
func TestWATWaitTable(t *testing.T) {
	wat, err := os.ReadFile("wat-wait/wat-wait.wasm")
	if err != nil {
		t.Fatal(err)
	}
	goWasm, _ := plugins.Builtin("wait")
	pw := cases.Load(t, "wat-wait", wat)
	pg := cases.Load(t, "wait", goWasm)
	table := append(cases.SerialCases("wait"), cases.Serial{Name: "bench-256", Snap: cases.BenchSnapshot("wait", 256)})
	for _, c := range table {
		t.Run(c.Name, func(t *testing.T) {
			dw, err := pw.DecideSerial(context.Background(), c.Snap)
			if err != nil {
				t.Fatal(err)
			}
			dg, err := pg.DecideSerial(context.Background(), c.Snap)
			if err != nil {
				t.Fatal(err)
			}
			if c.Want != nil || len(dw.Actions) == 0 {
				if got := cases.FormatSerial(dw); !cases.Equal(got, c.Want) {
					t.Fatal(cases.Diff(got, c.Want))
				}
			}
			if fmt.Sprint(dw.Actions) != fmt.Sprint(dg.Actions) {
				t.Fatalf("wat %v != go %v", dw.Actions, dg.Actions)
			}
		})
	}
}

// BuildCommand is the exact command of README.md, run from the repo root.
func buildCommand(name, out string) *exec.Cmd {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./plugins/"+name)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=")
	return cmd
}

// CI relies on this: the committed .wasm must be what the source builds to.
func TestCommittedWasmIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins")
	}
	dir := t.TempDir()
	for _, name := range plugins.Names() {
		out := filepath.Join(dir, name+".wasm")
		if b, err := buildCommand(name, out).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
		got, _ := os.ReadFile(out)
		want, _ := plugins.Builtin(name)
		if !bytes.Equal(got, want) {
			t.Errorf("plugins/%s/%s.wasm is stale (%d bytes built, %d committed): run go generate ./plugins/...", name, name, len(got), len(want))
		}
	}
}

func TestWATIsReproducible(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm not installed (Debian package wabt)")
	}
	out := filepath.Join(t.TempDir(), "w.wasm")
	if b, err := exec.Command("wat2wasm", "wat-wait/wait.wat", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile("wat-wait/wat-wait.wasm")
	if !bytes.Equal(got, want) {
		t.Fatal("plugins/wat-wait/wat-wait.wasm is stale: run go generate ./plugins/")
	}
}

func BenchmarkDecide(b *testing.B) {
	wat, err := os.ReadFile("wat-wait/wat-wait.wasm")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{16, 256} {
		s := cases.BenchSnapshot("wait", n)
		b.Run(fmt.Sprintf("wat-wait/wasm/waiting=%d", n), func(b *testing.B) {
			p := cases.Load(b, "wat-wait", wat)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.DecideSerial(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
