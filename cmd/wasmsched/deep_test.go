package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deepSnapshot is a truncated window (ABI v2): 100,000 runs wait, the
// oldest two and the newest two are in the snapshot.
const deepSnapshot = `{"group": "deep", "max_active": 1,
  "active": [{"id": "a1", "seq": 1}],
  "waiting": [{"id": "w11", "seq": 11}, {"id": "w12", "seq": 12}, {"id": "w100009", "seq": 100009}, {"id": "w100010", "seq": 100010}],
  "waiting_total": 100000, "waiting_oldest": 2}`

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	resetCommandFlags()
	var out, errw bytes.Buffer
	code := run(context.Background(), append([]string{"wasmsched"}, args...), &out, &errw)
	return code, out.String(), errw.String()
}

// TestPolicyDryRun_deepWindow: a snapshot file with a truncated window is
// read (waiting_total, waiting_oldest), the built-in priority answers with
// one discard_below for every older run, table and JSON show it, and
// `policy test` matches a discard_below expectation (and reports a wrong
// seq as a failed scenario).
func TestPolicyDryRun_deepWindow(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "deep.json")
	if err := os.WriteFile(snap, []byte(deepSnapshot), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "policy", "dry-run", "--policy", "priority", "--snapshot", snap, "-o", "json")
	if code != 0 {
		t.Fatalf("dry-run: exit %d: %s", code, errs)
	}
	var res struct {
		Valid   bool
		Actions []struct {
			Action, Run string
			Seq         uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, a := range res.Actions {
		got = append(got, a.Action+":"+a.Run)
		if a.Action == "discard_below" && a.Seq != 100010 {
			t.Errorf("discard_below seq %d, want 100010", a.Seq)
		}
	}
	if !res.Valid || strings.Join(got, " ") != "launch:w100010 stop:a1 discard_below:" {
		t.Fatalf("dry-run actions %v (valid %v):\n%s", got, res.Valid, out)
	}
	code, out, _ = runCLI(t, "policy", "dry-run", "--policy", "priority", "--snapshot", snap)
	if code != 0 || !regexp.MustCompile(`discard_below +\(waiting runs below seq 100010\) +superseded by a newer run`).MatchString(out) {
		t.Fatalf("dry-run table (exit %d):\n%s", code, out)
	}

	scen := func(seq string) string {
		p := filepath.Join(dir, "s"+seq+".json")
		body := `{"name": "deep", "snapshot": ` + deepSnapshot + `, "expect": [
		  {"action": "launch", "run": "w100010"}, {"action": "stop", "run": "a1"},
		  {"action": "discard_below", "seq": ` + seq + `}]}`
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if code, out, errs := runCLI(t, "policy", "test", "priority", scen("100010")); code != 0 {
		t.Fatalf("policy test with the right discard_below: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "policy", "test", "priority", scen("99"))
	if code != 1 || !strings.Contains(out, "- discard_below (waiting runs below seq 99)") || !strings.Contains(out, "+ discard_below (waiting runs below seq 100010)") {
		t.Fatalf("policy test with a wrong discard_below: exit %d\n%s", code, out)
	}
}

// TestPolicyDryRun_badWindow: window fields that contradict the waiting
// list are malformed input: exit 2, the field named.
func TestPolicyDryRun_badWindow(t *testing.T) {
	for _, c := range []struct{ fields, want string }{
		{`"waiting_total": 1`, "waiting_total: 1, fewer than the 2 runs of waiting"},
		{`"waiting_total": 10, "waiting_oldest": 3`, "waiting_oldest: 3, more than the 2 runs of waiting"},
		{`"waiting_total": 10`, "waiting_oldest: missing"},
	} {
		p := filepath.Join(t.TempDir(), "s.json")
		body := `{"waiting": [{"id": "a", "seq": 1}, {"id": "b", "seq": 2}], ` + c.fields + `}`
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runCLI(t, "policy", "dry-run", "--policy", "wait", "--snapshot", p)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want 2 and %q", c.fields, code, errs, c.want)
		}
	}
}

// TestPolicyDryRun_unreachableClusterOrSentinel: with no Redis at the
// cluster seeds or sentinels given, dry-run of a built-in still works
// offline at once: the reachability probe tries every address the URL
// names (it used to parse only single-node URLs, so these waited on
// go-redis's retries).
func TestPolicyDryRun_unreachableClusterOrSentinel(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(snap, []byte(`{"waiting": [{"id": "a"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"redis+cluster://127.0.0.1:1,127.0.0.1:2", "redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster"} {
		code, out, errs := runCLI(t, "--redis", url, "policy", "dry-run", "--policy", "wait", "--snapshot", snap, "-o", "json")
		if code != 0 || !strings.Contains(out, `"run": "a"`) {
			t.Errorf("%s: exit %d\n%s%s", url, code, out, errs)
		}
	}
}
