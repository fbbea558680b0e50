package policytool

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	csdk "github.com/wasmsched/wasmsched/abi/c"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"

	"github.com/wasmsched/wasmsched/internal/digest"
)

type BuildResult struct {
	File       string `json:"file"`
	Language   string `json:"language"`
	Kind       string `json:"kind"`
	ABIVersion int    `json:"abi_version"`
	Size       int    `json:"size"`
	SHA256     string `json:"sha256"`
}

// BuildTools are the compilers policy build runs.
type BuildTools struct{ Go, Cargo, CC string }

// DetectLanguage is policy build's language of dir.
func DetectLanguage(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
		return "rust"
	}
	cs, _ := filepath.Glob(filepath.Join(dir, "*.c"))
	gos, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(cs) > 0 && len(gos) == 0 {
		return "c"
	}
	return "go"
}

// sdkSection is the custom section "wasmsched_sdk" with lang as payload.
func sdkSection(lang string) []byte {
	name := "wasmsched_sdk"
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, lang...)
	return append([]byte{0, byte(len(body))}, body...)
}

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
	var cmd *exec.Cmd
	switch lang {
	case "go":
		cmd = exec.CommandContext(ctx, t.Go, "build", "-buildmode=c-shared", "-trimpath", "-o", absOut, ".")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	case "rust":
		cargo, env := t.Cargo, os.Environ()
		if cargo == "" {
			cargo = "cargo"
			if _, err := os.Stat("/usr/bin/cargo"); err == nil {
				cargo = "/usr/bin/cargo"
			}
		}
		if _, err := os.Stat("/usr/bin/rustc"); err == nil && os.Getenv("RUSTC") == "" {
			env = append(env, "RUSTC=/usr/bin/rustc")
		}
		env = append(env, "CARGO_TARGET_DIR="+filepath.Join(tmp, "target"), "RUSTFLAGS=-C target-feature=+bulk-memory")
		cmd = exec.CommandContext(ctx, cargo, "build", "--release", "--offline", "--target", "wasm32-wasi")
		cmd.Env = env
	case "c":
		if err := os.WriteFile(filepath.Join(tmp, "wasmsched.h"), csdk.Header, 0o644); err != nil {
			return BuildResult{}, err
		}
		srcs, _ := filepath.Glob(filepath.Join(absDir, "*.c"))
		if len(srcs) == 0 {
			return BuildResult{}, badinput.Errorf("build: --lang c but %s has no .c file", dir)
		}
		args := []string{"--target=wasm32-wasi", "-O2", "-mbulk-memory", "-nostdlib", "-ffreestanding", "-I", tmp,
			"-Wl,--no-entry", "-Wl,--export-dynamic", "-Wl,--strip-debug", "-o", absOut}
		cmd = exec.CommandContext(ctx, t.CC, append(args, srcs...)...)
	default:
		return BuildResult{}, badinput.Errorf("build: --lang %q: want go, rust or c", lang)
	}
	cmd.Dir = absDir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return BuildResult{}, badinput.Errorf("build %s (%s): %v:\n%s", dir, lang, err, strings.TrimSpace(buf.String()))
	}
	if buf.Len() > 0 {
		_, _ = stderr.Write(buf.Bytes())
	}
	if lang == "rust" { // the crate's one cdylib
		ws, _ := filepath.Glob(filepath.Join(tmp, "target", "wasm32-wasi", "release", "*.wasm"))
		if len(ws) != 1 {
			return BuildResult{}, badinput.Errorf("build %s (rust): want one cdylib .wasm in the cargo output, found %d (crate-type = [\"cdylib\"] in Cargo.toml)", dir, len(ws))
		}
		b, err := os.ReadFile(ws[0])
		if err != nil {
			return BuildResult{}, err
		}
		if err := os.WriteFile(absOut, b, 0o644); err != nil {
			return BuildResult{}, err
		}
	}
	wasm, err := os.ReadFile(absOut)
	if err != nil {
		return BuildResult{}, err
	}
	if lang == "c" { // the SDK section, as plugins/c/build.sh appends it
		wasm = append(wasm, sdkSection("c")...)
		if err := os.WriteFile(absOut, wasm, 0o644); err != nil {
			return BuildResult{}, err
		}
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

// --- inspect ---
