package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCompletionCandidates: the installed completion scripts ask the
// binary for candidates (--generate-bash-completion); it answers with the
// commands and subcommands of this version.
func TestCompletionCandidates(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"group", "policy", "completion", "version"}},
		{[]string{"group"}, []string{"set", "delete", "show"}},
	} {
		out, err := exec.Command(Binary(t), append(c.args, "--generate-bash-completion")...).Output()
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains("\n"+string(out), "\n"+w+"\n") {
				t.Errorf("%v: candidates %q lack %q", c.args, out, w)
			}
		}
	}
}
