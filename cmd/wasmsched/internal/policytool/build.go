package policytool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	assdk "github.com/wasmsched/wasmsched/abi/assemblyscript"
	csdk "github.com/wasmsched/wasmsched/abi/c"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/internal/digest"
)

// BuildResult is a built plugin (`policy build`).
type BuildResult struct {
	File       string `json:"file"`
	Language   string `json:"language"`
	Kind       string `json:"kind"`
	ABIVersion int    `json:"abi_version"`
	Size       int    `json:"size"`
	SHA256     string `json:"sha256"`
}

// BuildTools are the compilers policy build runs ("" = the default).
type BuildTools struct{ Go, Cargo, CC, ASC string }

// DetectLanguage is policy build's language of dir.
func DetectLanguage(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
		return "rust"
	}
	if _, err := os.Stat(filepath.Join(dir, asEntry)); err == nil {
		return "assemblyscript"
	}
	if len(cSources(dir)) > 0 {
		gos, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(gos) == 0 {
			return "c"
		}
	}
	return "go"
}

// cSources are the .c files of a C plugin: the *_test.c files beside it
// are native tests (they include wasmsched_test.h), not the plugin.
func cSources(dir string) []string {
	all, _ := filepath.Glob(filepath.Join(dir, "*.c"))
	var out []string
	for _, f := range all {
		if !strings.HasSuffix(f, "_test.c") {
			out = append(out, f)
		}
	}
	return out
}

// sdkSection is the custom section "wasmsched_sdk" with lang as payload.
func sdkSection(lang string) []byte {
	name := "wasmsched_sdk"
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, lang...)
	return append([]byte{0, byte(len(body))}, body...)
}

// build is one language's build of dir into out, in the scratch dir tmp.
type build struct {
	ctx               context.Context
	t                 BuildTools
	dir, out, tmp     string
	display, language string
	stderr            io.Writer
}

// Build compiles the policy in dir (lang "" = DetectLanguage) to out ("" =
// DIR's base name + .wasm) with its language's toolchain and loads the
// result once, so a module the host would refuse fails here. A compile
// error is bad input, with the compiler's output.
func Build(ctx context.Context, t BuildTools, lang, dir, out string, stderr io.Writer) (BuildResult, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return BuildResult{}, badinput.Wrap(err)
	}
	if !fi.IsDir() {
		return BuildResult{}, badinput.Errorf("build: %s is not a directory", dir)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return BuildResult{}, err
	}
	if lang == "" {
		lang = DetectLanguage(absDir)
	}
	if out == "" {
		out = filepath.Base(absDir) + ".wasm"
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return BuildResult{}, err
	}
	tmp, err := os.MkdirTemp("", "wasmsched-build-")
	if err != nil {
		return BuildResult{}, err
	}
	defer os.RemoveAll(tmp)
	b := build{ctx: ctx, t: t, dir: absDir, out: absOut, tmp: tmp, display: dir, language: lang, stderr: stderr}
	switch lang {
	case "go":
		err = b.goBuild()
	case "rust":
		err = b.rustBuild()
	case "c":
		err = b.cBuild()
	case "assemblyscript":
		err = b.asBuild()
	default:
		return BuildResult{}, badinput.Errorf("build: --lang %q: want go, rust, c or assemblyscript", lang)
	}
	if err != nil {
		return BuildResult{}, err
	}
	return loadBuilt(ctx, out, absOut, lang)
}

// run runs cmd in the plugin's directory; a failure is bad input with the
// tool's output. Output of a success goes to stderr.
func (b build) run(cmd *exec.Cmd) (string, error) {
	cmd.Dir = b.dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return buf.String(), badinput.Errorf("build %s (%s): %v:\n%s", b.display, b.language, err, strings.TrimSpace(buf.String()))
	}
	if buf.Len() > 0 {
		_, _ = b.stderr.Write(buf.Bytes())
	}
	return buf.String(), nil
}

func (b build) goBuild() error {
	goCmd := b.t.Go
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(b.ctx, goCmd, "build", "-buildmode=c-shared", "-trimpath", "-o", b.out, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	_, err := b.run(cmd)
	return err
}

func (b build) cBuild() error {
	if err := os.WriteFile(filepath.Join(b.tmp, "wasmsched.h"), csdk.Header, 0o644); err != nil {
		return err
	}
	srcs := cSources(b.dir)
	if len(srcs) == 0 {
		return badinput.Errorf("build: --lang c but %s has no .c file (besides *_test.c)", b.display)
	}
	cc := b.t.CC
	if cc == "" {
		cc = "clang"
	}
	args := []string{"--target=wasm32-wasi", "-O2", "-mbulk-memory", "-nostdlib", "-ffreestanding", "-I", b.tmp,
		"-Wl,--no-entry", "-Wl,--export-dynamic", "-Wl,--strip-debug", "-o", b.out}
	if _, err := b.run(exec.CommandContext(b.ctx, cc, append(args, srcs...)...)); err != nil {
		return err
	}
	wasm, err := os.ReadFile(b.out)
	if err != nil {
		return err
	}
	// the SDK section, as plugins/c/build.sh appends it
	return os.WriteFile(b.out, append(wasm, sdkSection("c")...), 0o644)
}

// asEntry is an AssemblyScript plugin's entry file, in its directory.
const asEntry = "assembly/index.ts"

// findASC is the AssemblyScript compiler of a build: the one given, else
// the project's (node_modules/.bin/asc in dir or a folder above it, as
// npm installs it), else an asc on PATH.
func findASC(given, dir string) (string, error) {
	if given != "" {
		if strings.ContainsRune(given, os.PathSeparator) {
			return filepath.Abs(given) // the compiler runs in dir
		}
		return given, nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "node_modules", ".bin", "asc")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if p, err := exec.LookPath("asc"); err == nil {
		return p, nil
	}
	return "", badinput.Errorf("build (assemblyscript): no AssemblyScript compiler: run `npm install --save-dev --save-exact assemblyscript@%s` in %s (Node 20 or later), or name one with --asc PATH",
		assdk.CompilerVersion, dir)
}

// asBuild compiles DIR/assembly/index.ts with the SDK this command embeds
// as the package "wasmsched" (written to the scratch dir, on the
// compiler's package path; a project's own node_modules/wasmsched comes
// first), the SDK's flags, and appends the SDK section.
func (b build) asBuild() error {
	if _, err := os.Stat(filepath.Join(b.dir, asEntry)); err != nil {
		return badinput.Errorf("build: --lang assemblyscript but %s has no %s", b.display, asEntry)
	}
	asc, err := findASC(b.t.ASC, b.dir)
	if err != nil {
		return err
	}
	pkg := filepath.Join(b.tmp, "packages", "wasmsched")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pkg, "index.ts"), assdk.Source, 0o644); err != nil {
		return err
	}
	args := append([]string{asEntry, "--path", filepath.Join(b.tmp, "packages"), "-o", b.out}, assdk.Flags...)
	if _, err := b.run(exec.CommandContext(b.ctx, asc, args...)); err != nil {
		return err
	}
	wasm, err := os.ReadFile(b.out)
	if err != nil {
		return err
	}
	return os.WriteFile(b.out, append(wasm, sdkSection("assemblyscript")...), 0o644)
}

// rustToolchain is a cargo, the rustc it runs, and the wasm32 WASI target
// that rustc has.
type rustToolchain struct{ cargo, rustc, target string }

// pickRust returns the first toolchain that can build a wasm plugin: the
// --cargo given, else the cargo on PATH (the one `cargo test` runs), else
// Debian's /usr/bin/cargo; its rustc must have a wasm32-wasip1 or (older
// toolchains) wasm32-wasi target installed.
func pickRust(ctx context.Context, cargoFlag string) (rustToolchain, error) {
	var cands []rustToolchain
	if cargoFlag != "" {
		rustc := filepath.Join(filepath.Dir(cargoFlag), "rustc")
		if !strings.ContainsRune(cargoFlag, os.PathSeparator) {
			rustc = "rustc"
		}
		cands = append(cands, rustToolchain{cargo: cargoFlag, rustc: rustc})
	} else {
		cands = append(cands, rustToolchain{cargo: "cargo", rustc: "rustc"}, rustToolchain{cargo: "/usr/bin/cargo", rustc: "/usr/bin/rustc"})
	}
	if env := os.Getenv("RUSTC"); env != "" {
		for i := range cands {
			cands[i].rustc = env
		}
	}
	var tried []string
	for _, c := range cands {
		if _, err := exec.LookPath(c.cargo); err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, c.rustc, "--print", "sysroot").Output()
		if err != nil {
			tried = append(tried, c.rustc+" (no sysroot: "+err.Error()+")")
			continue
		}
		sysroot := strings.TrimSpace(string(out))
		for _, target := range []string{"wasm32-wasip1", "wasm32-wasi"} {
			if fi, err := os.Stat(filepath.Join(sysroot, "lib", "rustlib", target)); err == nil && fi.IsDir() {
				c.target = target
				return c, nil
			}
		}
		tried = append(tried, c.cargo+" (its rustc has no wasm32-wasip1 or wasm32-wasi target)")
	}
	return rustToolchain{}, badinput.Errorf("build (rust): no Rust toolchain here builds wasm: %s; add the target to yours "+
		"(rustup target add wasm32-wasip1), or install Debian's (apt-get install rustc cargo libstd-rust-dev-wasm32), "+
		"or name one with --cargo PATH", strings.Join(append(tried, "none found"), "; "))
}

func (b build) rustBuild() error {
	tc, err := pickRust(b.ctx, b.t.Cargo)
	if err != nil {
		return err
	}
	cmd := func() *exec.Cmd {
		c := exec.CommandContext(b.ctx, tc.cargo, "build", "--release", "--offline", "--target", tc.target)
		c.Env = append(os.Environ(), "RUSTC="+tc.rustc, "CARGO_TARGET_DIR="+filepath.Join(b.tmp, "target"),
			"RUSTFLAGS=-C target-feature=+bulk-memory")
		return c
	}
	out, err := b.run(cmd())
	if err != nil && newerLockFile(out) {
		// Cargo.lock was written by a newer cargo (a rustup toolchain's
		// `cargo test`) than the one that builds wasm here. The SDK has no
		// registry dependencies, so building without it is the same build:
		// set it aside and put it back.
		restore, aerr := setLockAside(lockPath(out, b.dir))
		if aerr != nil {
			return errors.Join(err, aerr)
		}
		fmt.Fprintf(b.stderr, "wasmsched: %s cannot read Cargo.lock (written by a newer cargo); building without it, then putting it back\n", tc.cargo)
		_, err = b.run(cmd())
		if rerr := restore(); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	if err != nil {
		return err
	}
	ws, _ := filepath.Glob(filepath.Join(b.tmp, "target", tc.target, "release", "*.wasm"))
	if len(ws) != 1 {
		return badinput.Errorf("build %s (rust): want one cdylib .wasm in the cargo output, found %d (crate-type = [\"cdylib\"] in Cargo.toml)", b.display, len(ws))
	}
	wasm, err := os.ReadFile(ws[0])
	if err != nil {
		return err
	}
	return os.WriteFile(b.out, wasm, 0o644)
}

// newerLockFile reports whether cargo's output says the lock file is of a
// version it does not know.
func newerLockFile(out string) bool {
	return strings.Contains(out, "lock file version") || strings.Contains(out, "Cargo needs to be updated") ||
		strings.Contains(out, "failed to parse lock file")
}

// lockPath is the lock file cargo failed to read: the path its error
// names ("failed to parse lock file at: PATH"), else dir's Cargo.lock.
func lockPath(out, dir string) string {
	const at = "lock file at: "
	if i := strings.Index(out, at); i >= 0 {
		if p, _, _ := strings.Cut(out[i+len(at):], "\n"); strings.HasSuffix(strings.TrimSpace(p), "Cargo.lock") {
			return strings.TrimSpace(p)
		}
	}
	return filepath.Join(dir, "Cargo.lock")
}

// setLockAside renames lock and returns how to put it back (a build
// writes a lock of its own meanwhile: it is dropped).
func setLockAside(lock string) (restore func() error, err error) {
	aside := lock + ".wasmsched-aside"
	if err := os.Rename(lock, aside); err != nil {
		return nil, fmt.Errorf("build (rust): setting %s aside: %w", lock, err)
	}
	return func() error { return os.Rename(aside, lock) }, nil
}

// loadBuilt loads the built module once (ABI version, exports, kind,
// _initialize) and describes it.
func loadBuilt(ctx context.Context, out, absOut, lang string) (BuildResult, error) {
	wasm, err := os.ReadFile(absOut)
	if err != nil {
		return BuildResult{}, err
	}
	rt, err := NewRuntime(ctx, Sandbox{})
	if err != nil {
		return BuildResult{}, err
	}
	defer rt.Close(context.Background())
	p, err := rt.Load(ctx, out, wasm)
	if err != nil {
		return BuildResult{}, LoadError(fmt.Errorf("built %s but it is not a valid plugin: %w", out, err))
	}
	defer p.Close(context.Background())
	return BuildResult{File: out, Language: lang, Kind: p.Kind().String(), ABIVersion: int(p.ABIVersion()), Size: len(wasm), SHA256: digest.SHA256(wasm)}, nil
}
