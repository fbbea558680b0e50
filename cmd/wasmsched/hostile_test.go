package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
)

const hostileDir = "../../policies/testdata/hostile"

// TestPolicyHostile: the CLI's view of the sandbox's bounds. A plugin
// that exceeds its deadline is reported as such, naming the flag that sets
// it (exit 1, never "unreachable" or "invalid decision"); straight-line
// bulk memory code is stopped at the deadline; invalid and oversize
// modules exit 2 naming the problem, push included, before Redis is
// contacted.
func TestPolicyHostile(t *testing.T) {
	snap := filepath.Join(policyTestdata, "snapshot.json")
	for _, c := range []struct {
		name, plugin string
		extra        []string
		want         []string
	}{
		{"loop", "../../policies/testdata/loop.wasm", nil,
			[]string{"the decision exceeded its deadline", "wasmsched_decide did not return within its deadline of 50ms (--policy-timeout)"}},
		{"loop-20ms", "../../policies/testdata/loop.wasm", []string{"--policy-timeout", "20ms"},
			[]string{"did not return within its deadline of 20ms (--policy-timeout)"}},
		{"bulk-fill", filepath.Join(hostileDir, "bulk-fill.wasm"), nil, []string{"did not return within its deadline of 50ms"}},
	} {
		t.Run("dry-run/"+c.name, func(t *testing.T) {
			start := time.Now()
			code, out, errs := noRedis(t, append([]string{"policy", "dry-run", "-p", c.plugin, "-s", snap}, c.extra...)...)
			if el := time.Since(start); el > 20*time.Second {
				t.Fatalf("took %v", el)
			}
			if code != 1 || !strings.Contains(out, "TIMEOUT") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 with TIMEOUT", code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not say %q", errs, w)
				}
			}
			if strings.Contains(errs+out, "unreachable") || strings.Contains(errs, "invalid decision") {
				t.Errorf("a timeout reported as a trap or an invalid decision: %s%s", out, errs)
			}
		})
	}
	big := filepath.Join(t.TempDir(), "big.wasm")
	b, err := os.ReadFile(builtinFile(t, "wait"))
	if err != nil {
		t.Fatal(err)
	}
	// a valid module of 9 MiB: the wait plugin and a custom section
	pad := make([]byte, 9<<20)
	section := append([]byte{0, 0x84, 0x80, 0x80, 0x05, 3, 'p', 'a', 'd'}, pad...) // id 0, size 9 MiB+4 (LEB128), name "pad"
	if err := os.WriteFile(big, append(b, section...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"dry-run escape", []string{"policy", "dry-run", "-p", filepath.Join(hostileDir, "escape-global.wasm"), "-s", snap}, []string{"invalid module", "invalid global index"}},
		{"dry-run table bomb", []string{"policy", "dry-run", "-p", filepath.Join(hostileDir, "table-huge.wasm"), "-s", snap}, []string{"MaxTableSize", "10000000"}},
		{"push oversize", []string{"policy", "push", "p", big}, []string{"MaxModuleSize", "module size in bytes", "exceeds the limit 8388608"}},
		{"push over a lowered limit", []string{"policy", "push", "p", builtinFile(t, "wait"), "--max-module-size", "1MiB"}, []string{"MaxModuleSize", "1048576"}},
		{"dry-run bad timeout", []string{"policy", "dry-run", "-p", "wait", "-s", snap, "--policy-timeout", "0s"}, []string{"--policy-timeout must be > 0"}},
		{"test bad memory", []string{"policy", "test", "wait", snap, "--policy-memory", "1MiB"}, []string{"--policy-memory 1MiB: below the minimum 8MiB"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := noRedis(t, c.args...)
			if code != 2 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2", code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not name %q", errs, w)
				}
			}
			if strings.Contains(errs, "Redis") || strings.Contains(errs, "127.0.0.1:1") {
				t.Errorf("contacted Redis before refusing the module: %s", errs)
			}
		})
	}
}

// TestCLI_farWake: a policy that asks to be woken at i64 max ms (year 292
// million; policies/testdata/farwake.wat) is shown with the wake the host
// keeps, 24 h after the decision, and its ask beside it: policy dry-run,
// policy test and run explain print JSON and exit 0 (they exited 1 with
// "Time.MarshalJSON: year outside of range").
func TestCLI_farWake(t *testing.T) {
	const farwake = "../../policies/testdata/farwake.wasm"
	const asked = int64(9223372036854775807)
	e := newCLIEnv(t)
	e.ok(nil, "policy", "push", "farwake", farwake)
	e.ok(nil, "group", "set", "g", "--policy", "farwake")
	e.ok(nil, "submit", "g", "--id", "r1")
	within := func(what string, at *time.Time) {
		t.Helper()
		if at == nil {
			t.Fatalf("%s: no wake", what)
		}
		if d := time.Until(*at); d < 23*time.Hour || d > 25*time.Hour {
			t.Fatalf("%s: wake %v is %v ahead, want the host's bound, 24 h", what, at, d)
		}
	}
	var ex client.Explanation
	e.ok(&ex, "run", "explain", "r1")
	within("run explain", ex.WakeAt)
	var dr client.DryRun
	e.ok(&dr, "policy", "dry-run", "--policy", "farwake", "--group", "g")
	var wake *client.Action
	for i, a := range dr.Actions {
		if a.Action == "wake" {
			wake = &dr.Actions[i]
		}
	}
	if wake == nil || wake.AskedMS != asked {
		t.Fatalf("dry-run: wake %+v, want the ask %d beside the bounded wake", wake, asked)
	}
	within("policy dry-run", wake.At)
	sc := filepath.Join(t.TempDir(), "far.json")
	body := `{"name": "far", "snapshot": {"group": "g", "policy": "farwake", "max_active": 1, "now": "2026-01-01T00:00:00Z",
	  "waiting": [{"id": "r1", "seq": 1, "submitted_at": "2026-01-01T00:00:00Z"}], "active": []},
	  "expect": [{"action": "wake", "at": 9223372036854775807}]}`
	if err := os.WriteFile(sc, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "policy", "test", farwake, sc, "-o", "json")
	if code != 0 || !strings.Contains(out, `"at": "2026-01-02T00:00:00Z"`) || !strings.Contains(out, `"asked_ms": 9223372036854775807`) {
		t.Fatalf("policy test -o json: exit %d\n%s%s", code, out, errs)
	}
}
