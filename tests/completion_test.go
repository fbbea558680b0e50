package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/internal/redistest"
)

// TestCompletion: the bash script asks the binary (`__complete`, which
// never runs a command) and offers subcommands, a command's flags after
// "--", flag values, and the live namespace's groups, runs and policies;
// a completed word gets its space (no -o nospace).
func TestCompletion(t *testing.T) {
	r := redistest.Start(t)
	cli(t, r, "default", "group", "set", "nightly")
	cli(t, r, "default", "submit", "nightly", "--id", "job-1")
	script, code := RunCLI(t, "completion", "bash")
	if code != 0 || strings.Contains(script, "nospace") {
		t.Fatalf("completion bash: exit %d, or -o nospace:\n%s", code, script)
	}
	f := filepath.Join(t.TempDir(), "wasmsched.bash")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line string // the words before the cursor, then the word being typed
		want []string
		not  []string
	}{
		{"", []string{"group", "policy", "submit", "completion", "version"}, []string{"__complete"}},
		{"gr", []string{"group"}, []string{"submit"}},
		{"group ''", []string{"set", "delete", "show", "snapshot", "list"}, nil},
		{"submit --", []string{"--slots", "--priority", "--idempotency-key", "--redis"}, nil},
		{"run stop job-1 --", []string{"--reason"}, nil},
		{"submit ''", []string{"nightly"}, nil},
		{"run show ''", []string{"job-1"}, nil},
		{"group set nightly --policy ''", []string{"wait", "discard", "priority"}, []string{"reuse"}},
		{"runs --state ''", []string{"WAITING", "RUNNING"}, nil},
		{"runs -o ''", []string{"table", "json"}, nil},
	} {
		sh := `. ` + f + `; eval "COMP_WORDS=(wasmsched ` + c.line + `)"; [ "${#COMP_WORDS[@]}" -gt 1 ] || COMP_WORDS+=("");
COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _wasmsched_complete; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", sh)
		cmd.Env = append(cleanEnv(), "PATH="+filepath.Dir(Binary(t))+":"+os.Getenv("PATH"), "WASMSCHED_REDIS="+r.URL())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", c.line, err, out)
		}
		got := "\n" + string(out)
		for _, w := range c.want {
			if !strings.Contains(got, "\n"+w+"\n") {
				t.Errorf("%q: candidates %q lack %q", c.line, out, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, "\n"+w+"\n") {
				t.Errorf("%q: candidates %q offer %q", c.line, out, w)
			}
		}
	}
	// the run is untouched: completing after "run stop job-1 --" ran nothing
	if rs := Runs(t, r, "default", "nightly"); rs["job-1"].State != "WAITING" {
		t.Fatalf("job-1 is %s after the completions", rs["job-1"].State)
	}
}
