package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

// The defects a new user found (GitHub issue 14), each a case that failed
// before its fix.

func TestGroupSet_keepsWhatIsNotGiven(t *testing.T) {
	e := newCLIEnv(t)
	var g client.Group
	e.ok(&g, "group", "set", "g", "--max-active", "5")
	e.ok(&g, "group", "set", "g", "--policy", "discard")
	if g.Policy != "discard" || g.MaxActive != 5 {
		t.Fatalf("after --policy discard: %+v, want max_active 5 kept", g)
	}
	e.ok(&g, "group", "set", "g", "--max-active", "3")
	if g.Policy != "discard" || g.MaxActive != 3 {
		t.Fatalf("after --max-active 3: %+v, want policy discard kept", g)
	}
	e.ok(&g, "group", "set", "fresh")
	if g.Policy != "wait" || g.MaxActive != 1 {
		t.Fatalf("a bare group set: %+v, want the defaults", g)
	}
}

func TestGroupSet_policyMustExistAndBeSerial(t *testing.T) {
	e := newCLIEnv(t)
	e.ok(nil, "group", "set", "g", "--policy", "priority")
	e.usage("policy nosuch is neither a serial built-in (discard, priority, wait) nor pushed in namespace clitest", "group", "set", "g", "--policy", "nosuch")
	e.usage("slot-reuse policy", "group", "set", "g", "--policy", "reuse")
	// pushed but never activated: its groups would wait forever (the API
	// refuses it with the same message: host/api TestAPI_putGroup_policyCheck)
	wasm, _ := plugins.Builtin("wait")
	f := filepath.Join(t.TempDir(), "p.wasm")
	if err := os.WriteFile(f, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok(nil, "policy", "push", "dormant", f, "--no-activate")
	e.usage("policy dormant has no active version in namespace clitest, so its groups' runs would wait (wasmsched policy activate dormant VERSION)",
		"group", "set", "g", "--policy", "dormant")
	var g client.Group
	e.ok(&g, "group", "set", "g")
	if g.Policy != "priority" {
		t.Fatalf("a refused set changed the group: %+v", g)
	}
	code, _, errs := e.cli("group", "set", "g", "--policy", "later", "--allow-unpushed")
	if code != 0 || !strings.Contains(errs, "warning: policy later is neither a serial built-in") || !strings.Contains(errs, "accepted (--allow-unpushed)") {
		t.Fatalf("--allow-unpushed: exit %d, stderr %q", code, errs)
	}
}

func TestSubmit_priorityIsInt32(t *testing.T) {
	e := newCLIEnv(t)
	e.usage("priority 2147483648 outside -2147483648..2147483647", "submit", "g", "--priority", "2147483648")
	e.usage("priority -2147483649 outside", "submit", "g", "--priority", "-2147483649")
	var s client.Run
	e.ok(&s, "submit", "g", "--priority", "2147483647")
	r, err := e.st.GetRun(context.Background(), s.ID)
	if err != nil || r.Priority != 2147483647 {
		t.Fatalf("run %+v, %v", r, err)
	}
	// storage refuses it too, for callers other than the CLI
	if _, err := e.st.Submit(context.Background(), storage.SubmitRequest{Group: "g", Priority: 1 << 31}); err == nil {
		t.Fatal("storage accepted a priority outside int32")
	}
}

func TestSubmit_warnsWithoutLeader(t *testing.T) {
	e := newCLIEnv(t)
	code, _, errs := e.cli("submit", "g")
	if code != 0 || !strings.Contains(errs, "no host leads namespace clitest") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

func TestRunStop_stoppingExits2(t *testing.T) {
	e := newCLIEnv(t)
	var s client.Run
	e.ok(&s, "submit", "g", "--id", "r1")
	// a run its worker is stopping (the state a RUNNING run gets from run stop)
	if err := e.rdb.HSet(context.Background(), keyspace.Of(e.st).Run("r1"), "state", "STOPPING").Err(); err != nil {
		t.Fatal(err)
	}
	e.usage("run r1 is already STOPPING", "run", "stop", "r1")
	// a finished run: the stop script's refusal names its state
	e.ok(nil, "submit", "g", "--id", "r2")
	e.ok(nil, "run", "stop", "r2") // WAITING -> DISCARDED
	code, _, stderr := e.cli("run", "stop", "r2")
	if code != 2 || !strings.Contains(stderr, "run r2 is DISCARDED: it can no longer be stopped") || strings.Contains(stderr, "bad state") {
		t.Errorf("stop of a finished run: exit %d, stderr %q", code, stderr)
	}
}

func TestGroupDelete(t *testing.T) {
	e := newCLIEnv(t)
	e.ok(nil, "submit", "g", "--id", "a")
	e.ok(nil, "submit", "g", "--id", "b")
	e.usage("2 waiting run(s): --force discards them", "group", "delete", "g")
	e.usage("group nosuch not found", "group", "delete", "nosuch")
	out := e.ok(nil, "group", "delete", "g", "--force")
	if !strings.Contains(out, `"discarded": 2`) {
		t.Fatalf("delete --force: %s", out)
	}
	e.usage("group g not found", "group", "show", "g")
	r, err := e.st.GetRun(context.Background(), "a")
	if err != nil || r.State != storage.StateDiscarded {
		t.Fatalf("run a after delete: %+v %v", r, err)
	}
}

// TestRuns_unknownGroupAndNamespace: a group is a filter: one not made yet
// lists nothing (exit 0, with a warning that catches a typo), a deleted
// one lists the runs it kept; an unknown namespace is exit 2.
func TestRuns_unknownGroupAndNamespace(t *testing.T) {
	e := newCLIEnv(t)
	e.ok(nil, "submit", "g")
	code, out, errs := e.cli("runs", "-g", "nosuch", "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" || !strings.Contains(errs, "warning: group nosuch does not exist in namespace clitest (not made yet, or deleted)") {
		t.Fatalf("runs -g nosuch: exit %d, stdout %q, stderr %q; want an empty list and a warning", code, out, errs)
	}
	e.ok(nil, "group", "delete", "g", "--force")
	var rs []client.Run
	e.ok(&rs, "runs", "-g", "g")
	if len(rs) != 1 || rs[0].State != "DISCARDED" {
		t.Fatalf("runs of a deleted group: %+v, want its discarded run", rs)
	}
	for _, args := range [][]string{{"runs"}, {"group", "list"}} {
		var out, errb strings.Builder
		resetCommandFlags()
		code := run(context.Background(), append(append([]string{"wasmsched"}, args...), "--redis", e.url, "--namespace", "typo"), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "namespace typo does not exist") {
			t.Fatalf("%v in an unknown namespace: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestErrors_inUserTerms(t *testing.T) {
	e := newCLIEnv(t)
	code, _, errs := e.cli("group", "set", "a{b")
	if code != 2 || strings.Contains(errs, "storage:") || strings.HasSuffix(strings.TrimSpace(errs), ": invalid") ||
		!strings.Contains(errs, `group name "a{b" contains '{'`) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	dir := t.TempDir()
	list := filepath.Join(dir, "list.json")
	os.WriteFile(list, []byte(`[{"waiting": []}]`), 0o644)
	code, _, errs = noRedis(t, "policy", "dry-run", "-p", "wait", "-s", list)
	if code != 2 || strings.Contains(errs, "Go value") || strings.Contains(errs, "json.RawMessage") || !strings.Contains(errs, "want a snapshot object, got a list") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// TestSnapshotFile_fields: null and absent times are unset; every parse
// error names the field (with list indexes) or the position; a snapshot
// the host would refuse is malformed input (exit 2), not a failed test.
func TestSnapshotFile_fields(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("null.json", `{"max_active": 1, "active": [{"id": "a", "state": "RUNNING", "started_at": null}],
		"waiting": [{"id": "w", "started_at": null, "submitted_at": "2024-06-01T00:00:00Z"}, {"id": "x"}]}`)
	if code, out, errs := noRedis(t, "policy", "dry-run", "-p", "wait", "-s", ok); code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("null times: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, c := range []struct{ name, body, want string }{
		{"bad-time.json", `{"waiting": [{"id": "w"}, {"id": "x", "started_at": true}]}`, "waiting[1].started_at: want unix ms or an RFC 3339 time, got true or false"},
		{"bad-time-str.json", `{"waiting": [{"id": "w", "started_at": "yesterday"}]}`, `waiting[0].started_at: "yesterday": want unix ms or an RFC 3339 time`},
		{"bad-prio.json", `{"waiting": [{"id": "w", "priority": 2147483648}]}`, "waiting[0].priority: 2147483648: want an integer in -2147483648..2147483647"},
		{"unknown.json", `{"waiting": [{"id": "w", "colour": "red"}]}`, `waiting[0]: unknown field "colour"`},
		{"malformed.json", "{\n  \"waiting\": [\n    {\"id\": \"w\",}\n  ]\n}", "malformed JSON at line 3, column"},
		{"unsorted.json", `{"waiting": [{"id": "w1", "seq": 5}, {"id": "w2", "seq": 2}]}`, "seq 2 not above the previous 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := write(c.name, c.body)
			code, out, errs := noRedis(t, "policy", "dry-run", "-p", "wait", "-s", p)
			if code != 2 || out != "" || !strings.Contains(errs, c.want) || !strings.Contains(errs, c.name) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming %q", code, out, errs, c.want)
			}
		})
	}
	// In a scenario file the same snapshot is malformed input too (exit 2).
	sc := write("unsorted-scenario.json", `{"name": "s", "snapshot": {"waiting": [{"id": "w1", "seq": 5}, {"id": "w2", "seq": 2}]}, "expect": []}`)
	code, _, errs := noRedis(t, "policy", "test", "wait", sc)
	if code != 2 || !strings.Contains(errs, `scenario "s": snapshot: the host would refuse this snapshot`) {
		t.Fatalf("unsorted scenario: exit %d, stderr %q", code, errs)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, out, _ := noRedis(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"go": "go1.`) || !strings.Contains(out, `"wazero": "v1.`) {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	var sout, serr strings.Builder
	resetCommandFlags()
	if code := run(context.Background(), []string{"wasmsched", "--version"}, &sout, &serr); code != 0 || !strings.HasPrefix(sout.String(), "wasmsched ") || !strings.Contains(sout.String(), "wazero") {
		t.Fatalf("--version: exit %d, %q %q", code, sout.String(), serr.String())
	}
	for sh, want := range map[string]string{"bash": "complete -o default -F _wasmsched_complete wasmsched", "zsh": "compdef _wasmsched wasmsched", "fish": "complete -c wasmsched"} {
		code, out, errs := noRedis(t, "completion", sh)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q, missing %q", sh, code, errs, want)
		}
	}
	if code, _, errs := noRedis(t, "completion", "tcsh"); code != 2 || !strings.Contains(errs, "want bash, zsh or fish") {
		t.Errorf("completion tcsh: exit %d, %q", code, errs)
	}
}

func TestPolicyDelete(t *testing.T) {
	e := newCLIEnv(t)
	wait, discard := builtinFile(t, "wait"), builtinFile(t, "discard")
	e.ok(nil, "policy", "push", "mine", wait)
	e.ok(nil, "policy", "push", "mine", discard) // v2 active
	e.usage("version 2 of policy mine is active", "policy", "delete", "mine", "--version", "2")
	e.usage("has active version 2", "policy", "delete", "mine")
	e.usage("has no version 7", "policy", "delete", "mine", "--version", "7")
	e.usage("--version must be >= 1", "policy", "delete", "mine", "--version", "0")
	out := e.ok(nil, "policy", "delete", "mine", "--version", "1")
	if !strings.Contains(out, `"blobs_deleted": 1`) {
		t.Fatalf("delete v1: %s", out)
	}
	list := policyList(t, e, "mine")
	if len(list) != 1 || len(list[0].Versions) != 2 || !list[0].Versions[0].Deleted || list[0].Active != 2 {
		t.Fatalf("policy list after delete: %+v", list)
	}
	e.usage("was deleted", "policy", "activate", "mine", "1")
}

// TestHelp_saysWhatItMeans: help texts name no source file, no meaningless
// default, one default per flag, and which built-in reads --priority.
func TestHelp_saysWhatItMeans(t *testing.T) {
	e := &cliEnv{t: t, url: "redis://127.0.0.1:1/0", ns: "x"}
	for _, c := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"serve", "--help"}, []string{"--namespaces LIST"}, []string{".go"}},
		{[]string{"group", "set", "--help"}, []string{"(default: kept)", "--allow-unpushed", "none of them reads a run's --priority"}, []string{"(default: 0)"}},
		{[]string{"bench", "--help"}, []string{"--runs N                     submit N runs (default: 10 x --groups)"}, []string{"(default: 0)\n   --workers"}},
		{[]string{"submit", "--help"}, []string{"None of the built-ins reads", "oldest-first-by-priority"}, []string{"higher first for policies that use it"}},
		{[]string{"policy", "build", "--help"}, []string{"--out FILE", "-o is the output format"}, nil},
		{[]string{"policy", "delete", "--help"}, []string{"--version V"}, nil},
		{[]string{"group", "delete", "--help"}, []string{"--force"}, nil},
	} {
		code, out, errs := e.cli(c.args...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errs)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q", c.args, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%v: help still says %q", c.args, w)
			}
		}
	}
}

// TestGroupSnapshot (issue 13): a captured live snapshot replays in
// policy dry-run and, with a name and an expectation, as a policy test
// scenario; an unknown group exits 2.
func TestGroupSnapshot(t *testing.T) {
	e := newCLIEnv(t)
	e.ok(nil, "group", "set", "g", "--max-active", "2")
	for _, id := range []string{"a", "b", "c"} {
		e.ok(nil, "submit", "g", "--id", id, "--priority", "3")
	}
	code, snap, errs := e.cli("group", "snapshot", "g")
	if code != 0 || !strings.Contains(snap, `"max_active": 2`) || !strings.Contains(snap, `"id": "c"`) {
		t.Fatalf("group snapshot: exit %d, %q, stderr %q", code, snap, errs)
	}
	file := filepath.Join(t.TempDir(), "g.json")
	if err := os.WriteFile(file, []byte(snap), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := noRedis(t, "policy", "dry-run", "-p", "wait", "-s", file, "-o", "json")
	if code != 0 || !strings.Contains(out, `"run": "a"`) || !strings.Contains(out, `"run": "b"`) || strings.Contains(out, `"run": "c"`) {
		t.Fatalf("dry-run of the capture: exit %d, %s %s", code, out, errs)
	}
	scenario := `{"name": "captured", "snapshot": ` + snap + `, "expect": [{"action": "launch", "run": "a"}, {"action": "launch", "run": "b"}]}`
	sc := filepath.Join(t.TempDir(), "captured.json")
	if err := os.WriteFile(sc, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := noRedis(t, "policy", "test", "wait", sc); code != 0 || !strings.Contains(out, "1 passed") {
		t.Fatalf("policy test of the capture: exit %d, %s %s", code, out, errs)
	}
	e.usage("group nosuch not found", "group", "snapshot", "nosuch")
}
