package policies

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	assdk "github.com/wasmsched/wasmsched/abi/assemblyscript"
)

// buildGuest builds a misbehaving C or Rust plugin from testdata/guests
// with the guest toolchains (skipped without them, unless
// WASMSCHED_REQUIRE_GUESTS is set: scripts/test installs them).
func buildGuest(tb testing.TB, lang string) []byte {
	tb.Helper()
	need := map[string][]string{"c": {"clang", "wasm-ld"}, "rust": {"/usr/bin/cargo", "/usr/bin/rustc"},
		"assemblyscript": {"node", "../abi/assemblyscript/node_modules/.bin/asc"}}[lang]
	for _, tool := range need {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("WASMSCHED_REQUIRE_GUESTS") != "" {
				tb.Fatalf("%s is missing (scripts/test installs it)", tool)
			}
			tb.Skipf("%s is missing", tool)
		}
	}
	dir := tb.TempDir()
	out := filepath.Join(dir, lang+"-faulty.wasm")
	var cmd *exec.Cmd
	switch lang {
	case "c":
		cmd = exec.Command("clang", "--target=wasm32-wasi", "-O2", "-mbulk-memory", "-nostdlib", "-ffreestanding",
			"-I", "../abi/c", "-Wl,--no-entry", "-Wl,--export-dynamic", "-o", out, "testdata/guests/c-faulty.c")
	case "assemblyscript":
		// the flags and the SDK of `wasmsched policy build`
		pkg := filepath.Join(dir, "packages", "wasmsched")
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "index.ts"), assdk.Source, 0o644); err != nil {
			tb.Fatal(err)
		}
		asc, _ := filepath.Abs("../abi/assemblyscript/node_modules/.bin/asc")
		cmd = exec.Command(asc, append([]string{"assembly/index.ts", "--path", filepath.Join(dir, "packages"), "-o", out}, assdk.Flags...)...)
		cmd.Dir = "testdata/guests/as-faulty"
	case "rust":
		cmd = exec.Command("/usr/bin/cargo", "build", "--release", "--offline", "--quiet", "--target", "wasm32-wasi")
		cmd.Dir = "testdata/guests/rust-faulty"
		cmd.Env = append(os.Environ(), "RUSTC=/usr/bin/rustc", "CARGO_TARGET_DIR="+filepath.Join(dir, "target"),
			"RUSTFLAGS=-C target-feature=+bulk-memory")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the %s plugin: %v\n%s", lang, err, b)
	}
	if lang == "rust" {
		out = filepath.Join(dir, "target", "wasm32-wasi", "release", "rust_faulty.wasm")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestGuestFaults: a C, a Rust and an AssemblyScript plugin that loop
// forever, trap (panic, abort) and exhaust their memory are contained as a
// Go plugin is: the call returns ErrTimeout or ErrTrap, the instance is
// thrown away, and the next call decides normally; in both termination
// modes.
func TestGuestFaults(tt *testing.T) {
	for _, lang := range []string{"c", "rust", "assemblyscript"} {
		tt.Run(lang, func(tt *testing.T) {
			wasm := buildGuest(tt, lang)
			for _, m := range terminationModes {
				tt.Run(m, func(tt *testing.T) {
					p := load(tt, newRT(tt, Config{CallTimeout: 100 * time.Millisecond, Termination: m, MemoryLimit: 8 << 20}), lang+"-faulty", wasm)
					mustWork(tt, p)
					for _, c := range []struct {
						name string
						mode uint32
						want error
					}{
						{"loop", 99, ErrTimeout},
						{"trap", 98, ErrTrap},
						{"memory", 97, ErrTimeout},
					} {
						tt.Run(c.name, func(tt *testing.T) {
							for range 2 {
								start := time.Now()
								_, err := p.DecideSerial(context.Background(), mode(c.mode))
								if !errors.Is(err, c.want) {
									tt.Fatalf("err = %v, want %v", err, c.want)
								}
								if el := time.Since(start); el > 5*time.Second {
									tt.Fatalf("the call took %v", el)
								}
								mustWork(tt, p)
							}
						})
					}
				})
			}
		})
	}
}

// TestGuestFaults_assemblyscript: an AssemblyScript abort (a failed
// assert) traps with its message, which the error carries as a Go panic's
// does, and a decision the host refuses (a run launched twice) is
// ErrInvalidDecision, the instance thrown away; the next call decides.
func TestGuestFaults_assemblyscript(t *testing.T) {
	wasm := buildGuest(t, "assemblyscript")
	p := load(t, newRT(t, Config{CallTimeout: 2 * time.Second}), "as-faulty", wasm)
	mustWork(t, p)
	_, err := p.DecideSerial(context.Background(), mode(98))
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "abort: the faulty plugin gives up: mode 98 at assembly/index.ts:") {
		t.Fatalf("abort: %v, want ErrTrap with the message and where", err)
	}
	mustWork(t, p)
	if _, err := p.DecideSerial(context.Background(), mode(96)); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("a run launched twice: %v, want ErrInvalidDecision", err)
	}
	mustWork(t, p)
}
