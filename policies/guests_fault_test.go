package policies

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// buildGuest builds a misbehaving C or Rust plugin from testdata/guests
// with the guest toolchains (skipped without them, unless
// WASMSCHED_REQUIRE_GUESTS is set: scripts/test installs them).
func buildGuest(tb testing.TB, lang string) []byte {
	tb.Helper()
	need := map[string][]string{"c": {"clang", "wasm-ld"}, "rust": {"/usr/bin/cargo", "/usr/bin/rustc"}}[lang]
	for _, tool := range need {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("WASMSCHED_REQUIRE_GUESTS") != "" {
				tb.Fatalf("%s is missing", tool)
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

// TestGuestFaults: a C and a Rust plugin that loop forever, trap (panic)
// and exhaust their memory are contained as a Go plugin is: the call
// returns ErrTimeout or ErrTrap, the instance is thrown away, and the next
// call decides normally; in both termination modes.
func TestGuestFaults(tt *testing.T) {
	for _, lang := range []string{"c", "rust"} {
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
