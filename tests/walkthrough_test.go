package tests

import (
	"bufio"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
)

// TestPluginAuthorWalkthrough follows docs/plugin-authors.md literally:
// the set-up block of "Depending on the SDK" (with the repository for
// /path/to/wasmsched), then every `$ ` command of the page in order, in a
// fresh module, against a real redis-server with no host running (as the
// page says). A command whose transcript shows an error must fail, every
// other must succeed, and what it printed must be the page's transcript,
// line for line, once the volatile parts (hashes, times, durations, sizes,
// user@host) are masked on both sides.
func TestPluginAuthorWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin in a new module")
	}
	root, doc, r, bin := pageEnv(t, "plugin-authors.md")
	setup, steps := walkthrough(t, doc)
	if len(setup) < 5 || len(steps) < 12 {
		t.Fatalf("found %d set-up lines and %d commands in the page: did its layout change?", len(setup), len(steps))
	}
	work := t.TempDir()
	env := append(cleanEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "WASMSCHED_REDIS="+r.URL())
	sh := func(dir, line string) (string, error) {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The page's plugins other than the one it builds.
	setup = append(setup, "cp "+root+"/cmd/wasmsched/testdata/policy/greedy/greedy.wasm .", "cp "+root+"/plugins/wait/wait.wasm .")
	dir := work
	for _, line := range setup {
		line = strings.ReplaceAll(line, "/path/to/wasmsched", root)
		if strings.HasPrefix(line, "cd ") {
			dir = filepath.Join(dir, strings.TrimSpace(strings.TrimPrefix(line, "cd ")))
			continue
		}
		if out, err := sh(dir, line); err != nil {
			t.Fatalf("set-up %q: %v\n%s", line, err, out)
		}
	}
	norm := func(text string) []string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			if l = maskVolatile(strings.Join(strings.Fields(l), " ")); l != "" {
				out = append(out, l)
			}
		}
		return out
	}
	for _, st := range steps {
		start := time.Now()
		out, err := sh(dir, st.cmd)
		wantFail := false
		for _, l := range st.out {
			if strings.HasPrefix(l, "wasmsched: ") && !strings.HasPrefix(l, "wasmsched: warning: ") {
				wantFail = true
			}
		}
		if (err != nil) != wantFail {
			t.Errorf("$ %s\nexit error %v (the page shows %s), after %v; printed:\n%s", st.cmd, err,
				map[bool]string{true: "a failure", false: "success"}[wantFail], time.Since(start).Round(time.Millisecond), out)
			continue
		}
		got, want := norm(out), norm(strings.Join(st.out, "\n"))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("$ %s\nthe page shows:\n%s\nprinted:\n%s", st.cmd, strings.Join(want, "\n"), strings.Join(got, "\n"))
		}
	}
}

var volatileParts = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b[0-9a-f]{12,64}\b`), "<hex>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?`), "<time>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "<duration>"},
	{regexp.MustCompile(`^SIZE \d+`), "SIZE <bytes>"},
	{regexp.MustCompile(`\b[\w.-]+@[\w.-]+\b`), "<user@host>"},
}

// maskVolatile replaces what differs from one run of a command to the next.
func maskVolatile(l string) string {
	for _, v := range volatileParts {
		l = v.re.ReplaceAllString(l, v.with)
	}
	return l
}

type walkStep struct {
	cmd string
	out []string
}

// walkthrough extracts from the page the sh block that sets up the module
// (the one running `go mod init`) and every `$ ` command of the text
// blocks, with the lines the page shows after it.
func walkthrough(t *testing.T, doc string) (setup []string, steps []walkStep) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(doc))
	in, lang := false, ""
	var block []string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if !in {
				in, lang, block = true, strings.TrimPrefix(line, "```"), nil
				continue
			}
			in = false
			switch {
			case lang == "sh" && strings.Contains(strings.Join(block, "\n"), "go mod init"):
				setup = joinContinuations(block)
			case lang == "":
				for _, l := range block {
					if strings.HasPrefix(l, "$ ") {
						steps = append(steps, walkStep{cmd: strings.TrimPrefix(l, "$ ")})
					} else if len(steps) > 0 {
						steps[len(steps)-1].out = append(steps[len(steps)-1].out, l)
					}
				}
			}
			continue
		}
		if in {
			block = append(block, line)
		}
	}
	return setup, steps
}

// joinContinuations joins shell lines ending in a backslash.
func joinContinuations(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		out = append(out, strings.TrimSpace(cur+l))
		cur = ""
	}
	return out
}

// mdBlock is a code block of a Markdown page: fenced (with its language) or
// indented (lang ""), under the section heading it follows.
type mdBlock struct {
	heading, lang, text string
}

// mdBlocks returns the page's code blocks in order.
func mdBlocks(doc string) []mdBlock {
	var (
		out     []mdBlock
		heading string
		cur     *mdBlock
		body    []string
	)
	flush := func() {
		if cur != nil {
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
		}
		cur, body = nil, nil
	}
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case cur != nil && cur.lang != "" && strings.HasPrefix(l, "```"):
			flush()
		case cur != nil && cur.lang != "":
			body = append(body, l)
		case strings.HasPrefix(l, "```"):
			flush()
			cur = &mdBlock{heading: heading, lang: strings.TrimPrefix(l, "```")}
		case strings.HasPrefix(l, "    ") && (cur != nil || i == 0 || strings.TrimSpace(lines[i-1]) == ""):
			if cur == nil {
				cur = &mdBlock{heading: heading}
			}
			body = append(body, strings.TrimPrefix(l, "    "))
		default:
			flush()
			if strings.HasPrefix(l, "#") {
				heading = strings.TrimSpace(strings.TrimLeft(l, "#"))
			}
		}
	}
	flush()
	return out
}

// TestSDKWalkthrough follows docs/sdk-c.md and docs/sdk-rust.md as a new
// user does, in a new directory beside the checkout: the page's policy
// (oldest) and its native test, the build (policy build, and the build by
// hand), then every command of "Dry-run and push" against a real
// redis-server with no host (each must exit 0). The Rust page's native test
// runs with the cargo on PATH first, as a rustup user's would, so its
// Cargo.lock is the one the hand build with Debian's cargo meets.
func TestSDKWalkthrough(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	r := redistest.Start(t)
	bin := filepath.Dir(Binary(t))
	if err := os.Symlink(Binary(t), filepath.Join(bin, "wasmsched")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	for _, lang := range []string{"c", "rust"} {
		t.Run(lang, func(t *testing.T) {
			tools := map[string][]string{"c": {"clang", "wasm-ld"}, "rust": {"/usr/bin/cargo", "/usr/bin/rustc", "/usr/lib/rustlib/wasm32-wasi"}}[lang]
			for _, tool := range tools {
				_, err := exec.LookPath(tool)
				if strings.HasPrefix(tool, "/") {
					_, err = os.Stat(tool)
				}
				if err != nil {
					if os.Getenv("WASMSCHED_REQUIRE_GUESTS") != "" {
						t.Fatalf("%s is missing", tool)
					}
					t.Skipf("%s is missing", tool)
				}
			}
			doc, err := os.ReadFile(filepath.Join(root, "docs", "sdk-"+lang+".md"))
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			if err := os.Symlink(root, filepath.Join(work, "wasmsched")); err != nil {
				t.Fatal(err)
			}
			pol := filepath.Join(work, "oldest")
			env := append(cleanEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"WASMSCHED_REDIS="+r.URL(), "WASMSCHED_NAMESPACE=sdk-"+lang, "WASMSCHED="+root)
			sh := func(dir, script string) {
				t.Helper()
				cmd := exec.Command("sh", "-c", script)
				cmd.Dir, cmd.Env = dir, env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("in %s:\n%s\n%v\n%s", dir, script, err, out)
				}
			}
			write := func(p, text string) {
				t.Helper()
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var native, byHand, dry []string
			for _, b := range mdBlocks(string(doc)) {
				switch {
				case b.lang == "c" && strings.HasPrefix(b.text, "/* oldest.c"):
					write(filepath.Join(pol, "oldest.c"), b.text)
				case b.lang == "c" && strings.Contains(b.text, `#include "oldest.c"`):
					write(filepath.Join(pol, "oldest_test.c"), b.text)
				case b.lang == "toml" && strings.Contains(b.text, `name = "oldest"`):
					write(filepath.Join(pol, "Cargo.toml"), b.text)
				case b.lang == "rust" && strings.Contains(b.text, "pub struct Oldest"):
					write(filepath.Join(pol, "src", "lib.rs"), b.text)
				case b.lang == "rust" && strings.Contains(b.text, "decide_serial_into::<Oldest>"):
					f, err := os.OpenFile(filepath.Join(pol, "src", "lib.rs"), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					f.WriteString("\n" + b.text)
					f.Close()
				case b.lang == "" && b.heading == "Test natively":
					native = append(native, b.text)
				case b.lang == "" && b.heading == "Build" && !strings.Contains(b.text, "policy build"):
					byHand = append(byHand, b.text)
				case b.lang == "" && b.heading == "Dry-run and push":
					dry = append(dry, b.text)
				}
			}
			if len(native) != 1 || len(byHand) != 1 || len(dry) != 2 {
				t.Fatalf("found %d native-test, %d hand-build and %d dry-run blocks: did the page's layout change?", len(native), len(byHand), len(dry))
			}
			// the native test: Rust's runs where its crate is; C's with
			// WASMSCHED set to the checkout (the page's second way)
			nat := native[0]
			if lang == "c" {
				nat = strings.Join(slices.DeleteFunc(strings.Split(nat, "\n"), func(l string) bool {
					return strings.HasPrefix(strings.TrimSpace(l), "WASMSCHED=") || strings.HasPrefix(strings.TrimSpace(l), "#")
				}), "\n")
			}
			sh(pol, nat)
			if lang == "rust" {
				if _, err := os.Stat(filepath.Join(pol, "Cargo.lock")); err != nil {
					t.Fatalf("cargo test left no Cargo.lock: %v", err)
				}
			}
			sh(work, "wasmsched policy build ./oldest")
			if lang == "c" {
				sh(pol, byHand[0]) // (from the policy's directory, as the command names oldest.c)
			} else {
				sh(work, byHand[0])
			}
			dryRunAndPush(t, r, "sdk-"+lang, func(script string) { sh(work, script) }, dry)
		})
	}
}

// TestSDKWalkthrough_assemblyscript follows docs/sdk-assemblyscript.md
// literally, from a new directory: the set-up block (npm init, the
// compiler from npm), every file the page shows with its path in its first
// line, the native tests with the SDK's runner, the build, and every
// command of "Dry-run and push" against a real redis-server with no host
// (each must exit 0); the group then has the pushed policy.
func TestSDKWalkthrough_assemblyscript(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/test installs it)", tool)
		}
	}
	root, doc, r, bin := pageEnv(t, "sdk-assemblyscript.md")
	work := t.TempDir()
	pol := filepath.Join(work, "oldest")
	// npm from its cache when it can (scripts/test filled it)
	env := append(cleanEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"WASMSCHED_REDIS="+r.URL(), "WASMSCHED_NAMESPACE=sdk-assemblyscript", "WASMSCHED="+root,
		"npm_config_prefer_offline=true", "npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false")
	sh := func(dir, script string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in %s:\n%s\n%v\n%s", dir, script, err, out)
		}
	}
	var setup, native, build, dry []string
	files := map[string]string{}
	for _, b := range mdBlocks(doc) {
		first, _, _ := strings.Cut(b.text, "\n")
		switch {
		case b.lang == "ts" && strings.HasPrefix(first, "// ") && strings.Contains(first, ".ts:"):
			name, _, _ := strings.Cut(strings.TrimPrefix(first, "// "), ":")
			files[name] = b.text
		case b.lang == "" && b.heading == "Set up":
			setup = append(setup, b.text)
		case b.lang == "" && b.heading == "Test natively":
			native = append(native, b.text)
		case b.lang == "" && b.heading == "Build":
			build = append(build, b.text)
		case b.lang == "" && b.heading == "Dry-run and push":
			dry = append(dry, b.text)
		}
	}
	if len(setup) != 1 || len(native) != 1 || len(build) != 1 || len(dry) != 2 || len(files) != 3 {
		t.Fatalf("found %d set-up, %d native-test, %d build and %d dry-run blocks and files %v: did the page's layout change?",
			len(setup), len(native), len(build), len(dry), slices.Collect(maps.Keys(files)))
	}
	sh(work, setup[0])
	for name, text := range files {
		p := filepath.Join(pol, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sh(pol, native[0])
	sh(pol, build[0]) // it starts with cd ..
	dryRunAndPush(t, r, "sdk-assemblyscript", func(script string) { sh(work, script) }, dry)
}

// dryRunAndPush runs an SDK page's "Dry-run and push" blocks (a
// here-document as one script, other blocks line by line) and checks that
// the page left group nightly of namespace ns on the pushed policy oldest.
func dryRunAndPush(t *testing.T, r *redistest.Server, ns string, sh func(script string), blocks []string) {
	t.Helper()
	for _, block := range blocks {
		if strings.Contains(block, "<<") {
			sh(block)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			sh(line)
		}
	}
	g, err := Store(t, r, ns).GetGroup(context.Background(), "nightly")
	if err != nil || g.Policy != "oldest" {
		t.Fatalf("group nightly after the page: %+v %v", g, err)
	}
}

// pageEnv is what a walkthrough of docs/page starts with: the repository
// root, the page, a redis-server, and the folder of the wasmsched binary
// (with a "wasmsched" in it, for the page's commands).
func pageEnv(t *testing.T, page string) (root, doc string, r *redistest.Server, bin string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Dir(Binary(t))
	if err := os.Symlink(Binary(t), filepath.Join(bin, "wasmsched")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	return root, string(b), redistest.Start(t), bin
}
