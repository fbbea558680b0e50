package plugins_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// guestToolchain reports whether the tools to build lang's plugins are
// here: C needs clang and wasm-ld, Rust Debian's rustc with the
// wasm32-wasi target and cargo. Without them the tests skip, unless
// WASMSCHED_REQUIRE_GUESTS is set (scripts/test sets it after installing
// them: CI must not skip).
func guestToolchain(t *testing.T, lang string) {
	t.Helper()
	var missing string
	switch lang {
	case "c":
		for _, tool := range []string{"clang", "wasm-ld"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing = tool
			}
		}
	case "rust":
		for _, p := range []string{"/usr/bin/rustc", "/usr/bin/cargo", "/usr/lib/rustlib/wasm32-wasi"} {
			if _, err := os.Stat(p); err != nil {
				missing = p
			}
		}
	case "assemblyscript":
		if _, err := exec.LookPath("node"); err != nil {
			missing = "node"
		}
		if _, err := os.Stat("../abi/assemblyscript/node_modules/.bin/asc"); err != nil {
			missing = "the AssemblyScript compiler (npm ci in abi/assemblyscript)"
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("WASMSCHED_REQUIRE_GUESTS") != "" {
		t.Fatalf("%s plugins: %s is missing (apt-get install clang lld rustc cargo libstd-rust-dev-wasm32)", lang, missing)
	}
	t.Skipf("%s plugins: %s is missing", lang, missing)
}

// TestCommittedGuestsAreReproducible: plugins/<lang>/build.sh, run into a
// temp dir, writes exactly the committed .wasm of every example.
func TestCommittedGuestsAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins")
	}
	for _, lang := range []string{"c", "rust", "assemblyscript"} {
		t.Run(lang, func(t *testing.T) {
			guestToolchain(t, lang)
			out := t.TempDir()
			cmd := exec.Command("bash", filepath.Join(lang, "build.sh"))
			cmd.Env = append(os.Environ(), "OUT="+out, "CARGO_TARGET_DIR="+filepath.Join(t.TempDir(), "target"))
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s/build.sh: %v\n%s", lang, err, b)
			}
			names := []string{"wait", "discard", "priority", "reuse", "priority-first", "by-label"}
			if lang == "assemblyscript" {
				names = []string{"wait", "discard", "priority", "priority-first"}
			}
			for _, name := range names {
				got, err := os.ReadFile(filepath.Join(out, name, name+".wasm"))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(lang, name, name+".wasm"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("plugins/%s/%s/%s.wasm is stale: run plugins/%s/build.sh", lang, name, name, lang)
				}
			}
		})
	}
}

// TestRustNative runs the Rust plugins' and SDK's own tests natively.
func TestRustNative(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugins")
	}
	guestToolchain(t, "rust")
	for _, dir := range []string{"rust", "../abi/rust"} {
		cmd := exec.Command("/usr/bin/cargo", "test", "--offline", "--quiet")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RUSTC=/usr/bin/rustc", "RUSTDOC=/usr/bin/rustdoc", "CARGO_TARGET_DIR="+filepath.Join(t.TempDir(), "target"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cargo test in %s: %v\n%s", dir, err, b)
		}
	}
}

// TestCNative builds and runs the C policies' native tests
// (plugins/c/test/*_test.c with abi/c/wasmsched_test.h).
func TestCNative(t *testing.T) {
	guestToolchain(t, "c")
	tests, _ := filepath.Glob("c/test/*_test.c")
	if len(tests) == 0 {
		t.Fatal("no C tests")
	}
	for _, src := range tests {
		t.Run(filepath.Base(src), func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "t")
			if b, err := exec.Command("clang", "-O1", "-Wall", "-Werror", "-I", "../abi/c", "-o", bin, src).CombinedOutput(); err != nil {
				t.Fatalf("build %s: %v\n%s", src, err, b)
			}
			if b, err := exec.Command(bin).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", src, err, b)
			}
		})
	}
}

// TestAssemblyScriptNative runs the AssemblyScript SDK's own tests
// (abi/assemblyscript/test/*.test.ts: every reader and writer against the
// records its test helpers build) with its runner, under node.
func TestAssemblyScriptNative(t *testing.T) {
	guestToolchain(t, "assemblyscript")
	cmd := exec.Command("node", "test/run.mjs")
	cmd.Dir = "../abi/assemblyscript"
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node test/run.mjs: %v\n%s", err, b)
	}
	if !bytes.Contains(b, []byte(" passed, 0 failed")) {
		t.Fatalf("the runner ran nothing:\n%s", b)
	}
}
