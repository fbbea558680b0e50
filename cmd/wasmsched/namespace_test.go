package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/storage"
)

// TestCLINamespace: namespace set/show/snapshot, refusals (exit 2, nothing
// written), and policy dry-run / policy test of allocation policies.
func TestCLINamespace(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	if _, err := e.st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "x"}); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"--redis", e.url, "-n", e.ns}, args...)...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"namespace", "set", "--allocate", "wait"}, "policy wait is a serial policy"},
		{[]string{"namespace", "set", "--allocate", "nope"}, "policy nope is neither a built-in allocation policy (fair, fifo, priority-first)"},
		{[]string{"namespace", "set", "--allocate", "fair", "--weights", "a=0"}, "the weight must be an integer 1..1000"},
		{[]string{"namespace", "set", "--allocate", "fair", "--fair-label", "Tenant"}, "fair label"},
		{[]string{"namespace", "set"}, "nothing to set"},
		{[]string{"namespace", "set", "--placement", "round"}, `parameter placement: "round", want spread, pack or policy`},
		{[]string{"namespace", "set", "--param", "placement=x"}, `parameter placement: "x"`},
		{[]string{"namespace", "snapshot"}, "say --allocation"},
	} {
		code, _, errs := cli(c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Fatalf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
	if a, _ := e.st.Allocation(ctx); a.Policy != "" {
		t.Fatalf("a refused set wrote %+v", a)
	}
	if code, out, errs := cli("namespace", "set", "--allocate", "fair", "--fair-label", "tenant", "--weights", "a=2,b=1"); code != 0 ||
		!strings.Contains(out, "allocates with fair across label tenant (weights a=2,b=1)") {
		t.Fatalf("set: exit %d %q %q", code, out, errs)
	}
	if code, out, _ := cli("namespace", "set", "--weights", "a=3"); code != 0 || !strings.Contains(out, "fair across label tenant (weights a=3)") {
		t.Fatalf("merge: exit %d %q", code, out)
	}
	code, out, _ := cli("namespace", "show")
	if flat := strings.Join(strings.Fields(out), " "); code != 0 || !strings.Contains(flat, "allocate fair fair label tenant weights a=3") || !strings.Contains(flat, "TENANT SLOTS SHARE") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	if code, out, _ := cli("namespace", "set", "--allocate", "priority"); code != 0 || !strings.Contains(out, "allocates with priority-first") {
		t.Fatalf("priority alias: exit %d %q", code, out)
	}
	code, out, _ = cli("namespace", "snapshot", "--allocation")
	var snap map[string]any
	if err := json.Unmarshal([]byte(out), &snap); code != 0 || err != nil || snap["kind"] != "allocation" {
		t.Fatalf("snapshot: exit %d %v\n%s", code, err, out)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "alloc.json")
	if err := os.WriteFile(file, []byte(`{"kind": "allocation", "params": {"fair_label": "tenant"},
	  "workers": [{"worker": "w1", "slots": 2, "free": 1}],
	  "usage": [{"key": "tenant", "value": "a", "slots": 1, "runs": 1}],
	  "runs": [{"id": "a1", "labels": {"tenant": "a"}}, {"id": "a2", "labels": {"tenant": "a"}}, {"id": "b1", "labels": {"tenant": "b"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cli("policy", "dry-run", "--policy", "fair", "--snapshot", file)
	if code != 0 || !strings.Contains(out, "1. b1  (fits now)") || !strings.Contains(out, "2. a1\n") {
		t.Fatalf("dry-run fair: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := cli("policy", "dry-run", "--policy", "wait", "--snapshot", file); code != exitUsage || !strings.Contains(errs, "not an allocation policy") {
		t.Fatalf("dry-run wait: exit %d %q", code, errs)
	}
	if code, out, errs := cli("policy", "dry-run", "--policy", "fifo", "--allocation", "-o", "json"); code != 0 || !strings.Contains(out, `"order": []`) {
		t.Fatalf("dry-run live: exit %d %s %s", code, out, errs)
	}
	sc := filepath.Join(dir, "sc.json")
	if err := os.WriteFile(sc, []byte(`[{"name": "b-first", "allocation": {"free": 1, "params": {"fair_label": "tenant"},
	    "runs": [{"id": "a1", "labels": {"tenant": "a"}}, {"id": "b1", "labels": {"tenant": "b"}}],
	    "usage": [{"key": "tenant", "value": "a", "slots": 3}]}, "expect": ["b1", "a1"]},
	  {"name": "wrong", "allocation": {"runs": [{"id": "a1"}, {"id": "a2"}]}, "expect": ["a2", "a1"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli("policy", "test", "fair", sc)
	if code != exitFailure || !strings.Contains(out, "PASS  b-first") || !strings.Contains(out, "FAIL  wrong") || !strings.Contains(out, "+ order [a1 a2]") {
		t.Fatalf("policy test: exit %d\n%s", code, out)
	}

	// placement: set and cleared; a snapshot carries workers' labels and
	// groups and runs' requirements, and a placing policy's dry-run and
	// scenarios show the workers
	if code, out, errs := cli("namespace", "set", "--placement", "pack"); code != 0 || !strings.Contains(out, ", placement pack") {
		t.Fatalf("set --placement: exit %d %q %q", code, out, errs)
	}
	if a, _ := e.st.Allocation(ctx); a.Placement() != "pack" || a.Policy != "priority-first" {
		t.Fatalf("after --placement pack: %+v", a)
	}
	if code, out, _ := cli("namespace", "set", "--placement", ""); code != 0 || strings.Contains(out, "placement") {
		t.Fatalf("clear --placement: exit %d %q", code, out)
	}
	zs := filepath.Join(dir, "zones.json")
	if err := os.WriteFile(zs, []byte(`{"kind": "allocation",
	  "workers": [{"worker": "a1", "slots": 2, "labels": {"zone": "a"}}, {"worker": "b1", "slots": 2, "labels": {"zone": "b"}, "groups": ["g*"]}],
	  "runs": [{"id": "r1", "group": "g"}, {"id": "r2", "group": "g"}, {"id": "r3", "group": "h", "require": {"zone": "b"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	zoneSpread := filepath.Join("..", "..", "examples", "zone-spread", "zone-spread.wasm")
	code, out, errs = cli("policy", "dry-run", "--policy", zoneSpread, "--snapshot", zs)
	if code != 0 || !strings.Contains(out, "1. r1 on a1  (fits now)") || !strings.Contains(out, "2. r2 on b1  (fits now)") || !strings.Contains(out, "3. r3  (fits now)") {
		t.Fatalf("dry-run zone-spread: exit %d\n%s%s", code, out, errs)
	}
	// preferences (version 6) read from a snapshot; a bad one exits 2 naming it
	if err := os.WriteFile(zs, []byte(`{"kind": "allocation", "workers": [{"worker": "a1", "slots": 1}],
	  "runs": [{"id": "r1", "prefer": ["zone=b:5", "disk=ssd"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cli("policy", "dry-run", "--policy", "fifo", "--snapshot", zs); code != 0 || !strings.Contains(out, "1. r1") {
		t.Fatalf("dry-run with preferences: exit %d\n%s%s", code, out, errs)
	}
	if err := os.WriteFile(zs, []byte(`{"kind": "allocation", "runs": [{"id": "r1", "prefer": ["zone=b:0"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli("policy", "dry-run", "--policy", "fifo", "--snapshot", zs); code != exitUsage || !strings.Contains(errs, "runs[0].prefer") || !strings.Contains(errs, "weight") {
		t.Fatalf("dry-run bad preference: exit %d %q", code, errs)
	}
	if err := os.WriteFile(zs, []byte(`{"kind": "allocation", "workers": [{"worker": "a1", "groups": ["bad group"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli("policy", "dry-run", "--policy", zoneSpread, "--snapshot", zs); code != exitUsage || !strings.Contains(errs, "workers[0].groups") {
		t.Fatalf("dry-run bad groups: exit %d %q", code, errs)
	}
}
