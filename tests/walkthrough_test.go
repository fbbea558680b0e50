package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "plugin-authors.md"))
	if err != nil {
		t.Fatal(err)
	}
	setup, steps := walkthrough(t, string(doc))
	if len(setup) < 5 || len(steps) < 12 {
		t.Fatalf("found %d set-up lines and %d commands in the page: did its layout change?", len(setup), len(steps))
	}
	r := redistest.Start(t)
	work := t.TempDir()
	bin := filepath.Dir(Binary(t))
	if err := os.Symlink(Binary(t), filepath.Join(bin, "wasmsched")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
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
