package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/policytool"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/policy")

const policyTestdata = "testdata/policy"

var (
	reSHA  = regexp.MustCompile(`"(version|sha256)": "[0-9a-f]{64}"`)
	reTime = regexp.MustCompile(`"(pushed_at|at)": "[^"]*"`)
	reWho  = regexp.MustCompile(`"who": "[^"]*"`)
)

// normalise replaces volatile fields (times, who, content hashes of the
// built-ins, which change when a plugin is rebuilt) by placeholders.
func normalise(s string) string {
	s = reSHA.ReplaceAllString(s, `"$1": "<sha256>"`)
	s = reTime.ReplaceAllString(s, `"$1": "<time>"`)
	return reWho.ReplaceAllString(s, `"who": "<who>"`)
}

// golden compares got (normalised) with testdata/policy/NAME, or rewrites
// it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalise(got)
	path := filepath.Join(policyTestdata, "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// builtinFile writes a built-in's wasm to a temp file and returns its path.
func builtinFile(t *testing.T, name string) string {
	t.Helper()
	b, ok := plugins.Builtin(name)
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	p := filepath.Join(t.TempDir(), name+".wasm")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// noRedis runs the CLI with a --redis URL nobody listens on.
func noRedis(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"wasmsched"}, args...)
	full = append(full, "--redis", "redis://127.0.0.1:1/0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resetCommandFlags()
	code := run(ctx, full, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMain(m *testing.M) {
	// Keep the tests' wazero compilation cache out of the user's cache dir.
	// The go command (policy build) keeps the user's build cache.
	if os.Getenv("GOCACHE") == "" {
		if d, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(d, "go-build"))
		}
	}
	dir, err := os.MkdirTemp("", "wasmsched-cli-cache")
	if err == nil {
		os.Setenv("XDG_CACHE_HOME", dir)
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func TestPolicyInspect(t *testing.T) {
	greedy := filepath.Join(policyTestdata, "greedy", "greedy.wasm")
	code, out, errs := noRedis(t, "policy", "inspect", greedy, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden(t, "inspect.json", out)
	code, out, _ = noRedis(t, "policy", "inspect", greedy)
	if code != 0 || !strings.Contains(out, "wasmsched_decide") || !strings.Contains(out, "(i32) -> (i64)") {
		t.Errorf("table: exit %d\n%s", code, out)
	}

	junk := filepath.Join(t.TempDir(), "junk.wasm")
	b := make([]byte, 4096)
	rand.Read(b)
	os.WriteFile(junk, b, 0o644)
	trunc := filepath.Join(t.TempDir(), "trunc.wasm")
	w, _ := plugins.Builtin("wait")
	os.WriteFile(trunc, w[:len(w)/2], 0o644)
	for _, c := range []struct{ file, want string }{
		{junk, "wasm magic"},
		{trunc, "malformed module"},
		{"../../policies/testdata/badversion.wasm", "ABI version"},
		{"../../policies/testdata/missing.wasm", "missing exports"},
		{"../../policies/testdata/badsig.wasm", "signature"},
		{"../../policies/testdata/badkind.wasm", "kind"},
		{filepath.Join(t.TempDir(), "nope.wasm"), "no such file"},
	} {
		code, out, errs := noRedis(t, "policy", "inspect", c.file)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("inspect %s: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.file, code, out, errs, c.want)
		}
	}
}

func TestPolicyTestCommand(t *testing.T) {
	sc := filepath.Join(policyTestdata, "scenarios")
	// All pass: exit 0, no Redis needed for a built-in.
	code, out, errs := noRedis(t, "policy", "test", "wait", filepath.Join(sc, "wait-pass.json"), "-o", "json")
	if code != 0 {
		t.Fatalf("wait-pass: exit %d: %s", code, errs)
	}
	golden(t, "test-pass.json", out)
	// A directory: all *.json; -r filters by name.
	code, out, errs = noRedis(t, "policy", "test", "reuse", filepath.Join(sc, "slot-reuse"), "-r", "^nothing")
	if code != 2 || !strings.Contains(errs, "no scenarios") {
		t.Errorf("-r matching nothing: exit %d %s %s", code, out, errs)
	}
	// Slot-reuse scenarios against a serial policy fail, naming the mismatch.
	code, out, _ = noRedis(t, "policy", "test", "wait", filepath.Join(sc, "slot-reuse"))
	if code != 1 || !strings.Contains(out, "scenario is for a slot-reuse policy, the policy is serial") {
		t.Errorf("reuse scenarios vs wait: exit %d\n%s", code, out)
	}
	code, out, errs = noRedis(t, "policy", "test", "reuse", filepath.Join(sc, "slot-reuse"))
	if code != 0 || !strings.Contains(out, "PASS") {
		t.Fatalf("reuse scenarios: exit %d\n%s\n%s", code, out, errs)
	}
	// A failing scenario: exit 1 with the diff.
	code, out, errs = noRedis(t, "policy", "test", "wait", filepath.Join(sc, "wait-fail.json"), "-o", "json")
	if code != 1 {
		t.Fatalf("wait-fail: exit %d, want 1: %s", code, errs)
	}
	golden(t, "test-fail.json", out)
	code, out, _ = noRedis(t, "policy", "test", "wait", filepath.Join(sc, "wait-fail.json"))
	if code != 1 || !regexp.MustCompile(`FAIL +priority-is-ignored`).MatchString(out) || !strings.Contains(out, "- launch r2") || !strings.Contains(out, "+ launch r1") {
		t.Errorf("table of a failing test: exit %d\n%s", code, out)
	}
	// -r keeps only the passing scenario of the failing file.
	if code, out, errs := noRedis(t, "policy", "test", "wait", filepath.Join(sc, "wait-fail.json"), "-r", "^oldest"); code != 0 {
		t.Errorf("-r ^oldest: exit %d\n%s\n%s", code, out, errs)
	}
	// An invalid decision fails the scenario.
	greedy := filepath.Join(policyTestdata, "greedy", "greedy.wasm")
	code, out, _ = noRedis(t, "policy", "test", greedy, filepath.Join(sc, "wait-pass.json"))
	if code != 1 || !strings.Contains(out, "exceeds max_active") {
		t.Errorf("greedy: exit %d\n%s", code, out)
	}
	// Malformed files: exit 2 naming the file and the field.
	for _, c := range []struct{ file, want string }{
		{"bad-action.json", `expect[0].action`},
		{"bad-state.json", `waiting[0].state`},
		{"unknown-field.json", `unknown field "snapshots"`},
		{"no-name.json", `name: missing`},
		{"not-json.json", "not-json.json"},
	} {
		path := filepath.Join(sc, "malformed", c.file)
		code, out, errs := noRedis(t, "policy", "test", "wait", path)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) || !strings.Contains(errs, c.file) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.file, code, out, errs, c.want)
		}
	}
}

func TestPolicyDryRunSnapshot(t *testing.T) {
	snap := filepath.Join(policyTestdata, "snapshot.json")
	code, out, errs := noRedis(t, "policy", "dry-run", "--policy", "priority", "--snapshot", snap, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden(t, "dry-run-snapshot.json", out)
	code, out, _ = noRedis(t, "policy", "dry-run", "--policy", "priority", "--snapshot", snap)
	if code != 0 || !strings.Contains(out, "discard") || !strings.Contains(out, "valid") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
	// An invalid decision: exit 1, printed with its errors.
	greedy := filepath.Join(policyTestdata, "greedy", "greedy.wasm")
	code, out, _ = noRedis(t, "policy", "dry-run", "-p", greedy, "-s", snap, "-o", "json")
	if code != 1 || !strings.Contains(out, `"valid": false`) || !strings.Contains(out, "exceeds max_active") {
		t.Errorf("greedy: exit %d\n%s", code, out)
	}
	// Bad usage.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--snapshot", snap}, "--policy"},
		{[]string{"--policy", "wait"}, "exactly one of"},
		{[]string{"--policy", "nosuch", "--snapshot", snap}, `"nosuch"`},
		{[]string{"--policy", "reuse", "--snapshot", snap}, "slot-reuse"},
		{[]string{"--policy", "wait", "--snapshot", filepath.Join(policyTestdata, "scenarios", "malformed", "bad-state.json")}, "state"},
	} {
		code, out, errs := noRedis(t, append([]string{"policy", "dry-run"}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.args, code, out, errs, c.want)
		}
	}
}

// dumpNamespace returns every key of the namespace with its DUMP.
func dumpNamespace(t *testing.T, e *cliEnv) map[string]string {
	t.Helper()
	ctx := context.Background()
	c := e.rdb
	keys, err := c.Keys(ctx, keyspace.Of(e.st).Prefix()+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, k := range keys {
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		m[k] = v
	}
	return m
}

func sameDump(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("namespace had %d keys, now %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("key %s changed", k)
		}
	}
}

func TestPolicyDryRunGroupWritesNothing(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	if _, err := e.st.SetGroup(ctx, "nightly", "wait", 1); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"r1", "r2", "r3"} {
		if _, err := e.st.Submit(ctx, storage.SubmitRequest{Group: "nightly", ID: id, Priority: i}); err != nil {
			t.Fatal(err)
		}
	}
	before := dumpNamespace(t, e)
	code, out, errs := e.cli("policy", "dry-run", "--policy", "priority", "--group", "nightly", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden(t, "dry-run-group.json", out)
	code, out, errs = e.cli("policy", "dry-run", "--group", "nightly", "--policy", "discard")
	if code != 0 || !strings.Contains(out, "DIFF") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errs)
	}
	sameDump(t, before, dumpNamespace(t, e))
	e.usage("group nosuch not found", "policy", "dry-run", "--policy", "wait", "--group", "nosuch")
}

// policyList returns `policy list NAME -o json`.
func policyList(t *testing.T, e *cliEnv, name string) []client.Policy {
	t.Helper()
	var ps []client.Policy
	e.ok(&ps, "policy", "list", name)
	return ps
}

func TestPolicyPushGateAndRegistry(t *testing.T) {
	e := newCLIEnv(t)
	prio := builtinFile(t, "priority")
	wait := builtinFile(t, "wait")
	reuse := builtinFile(t, "reuse")

	// A good push, a second version, then the bad pushes.
	var p policytool.PushResult
	e.ok(&p, "policy", "push", "priority", prio, "--note", "first", "--force")
	if p.Version != 1 || !p.Active || p.Kind != "serial" || p.Cases == 0 {
		t.Fatalf("push: %+v", p)
	}
	e.ok(&p, "policy", "push", "priority", wait, "--note", "wait as priority", "--no-activate")
	if p.Version != 2 || p.Active {
		t.Fatalf("push --no-activate: %+v", p)
	}

	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.wasm")
	b := make([]byte, 8192)
	rand.Read(b)
	os.WriteFile(junk, b, 0o644)
	trunc := filepath.Join(dir, "trunc.wasm")
	pb, _ := plugins.Builtin("priority")
	os.WriteFile(trunc, pb[:len(pb)*2/3], 0o644)
	td := "../../policies/testdata/"
	greedy := filepath.Join(policyTestdata, "greedy", "greedy.wasm")
	before := dumpNamespace(t, e)
	for _, c := range []struct {
		name, file, want string
	}{
		{"priority", junk, "wasm magic"},
		{"priority", trunc, "malformed module"},
		{"priority", reuse, "must be serial, the plugin is slot-reuse"},
		{"reuse", prio, "must be slot-reuse, the plugin is serial"},
		{"priority", td + "badversion.wasm", "ABI version"},
		{"priority", td + "missing.wasm", "missing exports"},
		{"priority", greedy, `conformance run: policy "priority": case "only-waiting"`},
		{"priority", td + "loop.wasm", "deadline"},
		{"priority", prio, "already version 1"},
	} {
		code, out, errs := e.cli("policy", "push", c.name, c.file, "--force")
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("push %s %s: exit %d, stdout %q, stderr %q; want exit 2 naming %q", c.name, c.file, code, out, errs, c.want)
		}
		if ps := policyList(t, e, "priority"); ps[0].Active != 1 || len(ps[0].Versions) != 2 {
			t.Errorf("after push of %s: priority active %d with %d versions, want 1 with 2", c.file, ps[0].Active, len(ps[0].Versions))
		}
	}
	sameDump(t, before, dumpNamespace(t, e))

	// A new name takes the plugin's kind; later pushes must match.
	e.ok(&p, "policy", "push", "restore-safe", reuse)
	if p.Kind != "slot-reuse" {
		t.Fatalf("new name kind %q", p.Kind)
	}
	e.usage("must be slot-reuse", "policy", "push", "restore-safe", wait)

	// activate, rollback, list (golden).
	var a activeJSON
	e.ok(&a, "policy", "activate", "priority", "2")
	if a.Active != 2 {
		t.Fatalf("activate: %+v", a)
	}
	if ps := policyList(t, e, "priority"); ps[0].Active != 2 {
		t.Fatalf("active %d after activate 2", ps[0].Active)
	}
	e.ok(&a, "policy", "rollback", "priority", "--note", "back")
	if a.Active != 1 {
		t.Fatalf("rollback: %+v", a)
	}
	e.usage("no version 7", "policy", "activate", "priority", "7")
	e.usage("not found", "policy", "activate", "nosuch", "1")
	// past its first version a pushed-only name has none active; then
	// there is nothing earlier
	e.ok(&a, "policy", "rollback", "restore-safe")
	if a.Active != 0 || !strings.Contains(a.Message, "no version is active: its groups hold") {
		t.Fatalf("rollback past the first version: %+v", a)
	}
	e.usage("no earlier active version", "policy", "rollback", "restore-safe")
	e.ok(&a, "policy", "activate", "restore-safe", "1")
	out := e.ok(nil, "policy", "list")
	golden(t, "list.json", out)
	var all []client.Policy
	json.Unmarshal([]byte(out), &all)
	var names []string
	for _, p := range all {
		names = append(names, p.Name)
	}
	if !sort.StringsAreSorted(names) || len(all) != 8 {
		t.Errorf("list names %v, want 8 sorted (3 pushed names over 7 built-ins + restore-safe)", names)
	}
	code, tab, _ := e.cli("policy", "list")
	if code != 0 || !strings.Contains(tab, "1*") {
		t.Errorf("table: exit %d\n%s", code, tab)
	}

	// The active pushed version is what a name resolves to.
	code, out, errs := e.cli("policy", "dry-run", "--policy", "priority", "--snapshot", filepath.Join(policyTestdata, "snapshot.json"), "-o", "json")
	if code != 0 || !strings.Contains(out, `"policy": "priority v1"`) {
		t.Errorf("dry-run of pushed name: exit %d\n%s\n%s", code, out, errs)
	}
}

func TestPolicyBuildExample(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a plugin")
	}
	e := newCLIEnv(t)
	out := filepath.Join(t.TempDir(), "ofp.wasm")
	var b policytool.BuildResult
	// --out is the file; -o is the format, before or after the command
	// (-o json after build once wrote a file named "json").
	resetCommandFlags()
	var sout, serr bytes.Buffer
	code := run(context.Background(), []string{"wasmsched", "policy", "build", "../../examples/oldest-first-by-priority", "--out", out, "-o", "json"}, &sout, &serr)
	if code != 0 {
		t.Fatalf("build: exit %d: %s", code, serr.String())
	}
	if err := json.Unmarshal(sout.Bytes(), &b); err != nil || b.Kind != "serial" || b.ABIVersion != abi.Version || b.Size == 0 || b.File != out {
		t.Fatalf("build output %q: %v", sout.String(), err)
	}
	if _, err := os.Stat("json"); err == nil {
		t.Fatalf("build wrote a file named json")
	}
	code, stdout, errs := e.cli("policy", "test", out, "../../examples/oldest-first-by-priority/scenarios")
	if code != 0 {
		t.Fatalf("test: exit %d\n%s\n%s", code, stdout, errs)
	}
	var p policytool.PushResult
	e.ok(&p, "policy", "push", "oldest-first", out)
	if p.Version != 1 || p.Kind != "serial" {
		t.Fatalf("push: %+v", p)
	}
	// A compile error: exit 2 with the compiler's output.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "go.mod"), []byte("module bad\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(bad, "main.go"), []byte("package main\n\nfunc main() { undefinedThing() }\n"), 0o644)
	resetCommandFlags()
	sout.Reset()
	serr.Reset()
	code = run(context.Background(), []string{"wasmsched", "policy", "build", bad, "--out", filepath.Join(bad, "x.wasm")}, &sout, &serr)
	if code != 2 || !strings.Contains(serr.String(), "undefined: undefinedThing") {
		t.Errorf("bad build: exit %d, stderr %q", code, serr.String())
	}
}

// TestCLIPolicyBuild_languages: policy build detects a Rust crate and a C
// directory, builds them with their toolchains (serial and allocation
// plugins), and inspect shows the language each SDK wrote.
func TestCLIPolicyBuild_languages(t *testing.T) {
	cTools, rustTools := []string{"clang", "wasm-ld"}, []string{"/usr/bin/cargo", "/usr/bin/rustc"}
	const asc = "../../abi/assemblyscript/node_modules/.bin/asc"
	asTools := []string{"node", asc}
	for _, tc := range []struct {
		lang, dir, kind string
		tools           []string
	}{
		{"c", "../../plugins/c/discard", "serial", cTools},
		{"rust", "../../plugins/rust/priority", "serial", rustTools},
		{"c", "../../plugins/c/priority-first", "allocation", cTools},
		{"rust", "../../plugins/rust/priority-first", "allocation", rustTools},
		{"assemblyscript", "../../plugins/assemblyscript/priority", "serial", asTools},
		{"assemblyscript", "../../plugins/assemblyscript/priority-first", "allocation", asTools},
	} {
		t.Run(tc.lang+"-"+tc.kind, func(t *testing.T) {
			for _, tool := range tc.tools {
				if _, err := exec.LookPath(tool); err != nil {
					if os.Getenv("WASMSCHED_REQUIRE_GUESTS") != "" {
						t.Fatalf("%s is missing", tool)
					}
					t.Skipf("%s is missing", tool)
				}
			}
			out := filepath.Join(t.TempDir(), "p.wasm")
			args := []string{"policy", "build", tc.dir, "--out", out, "-o", "json"}
			if tc.lang == "assemblyscript" {
				args = append(args, "--asc", asc)
			}
			code, stdout, errs := noRedis(t, args...)
			var b policytool.BuildResult
			if code != 0 || json.Unmarshal([]byte(stdout), &b) != nil || b.Language != tc.lang || b.Kind != tc.kind || b.ABIVersion != abi.Version {
				t.Fatalf("build: exit %d %s %s", code, stdout, errs)
			}
			code, stdout, errs = noRedis(t, "policy", "inspect", out, "-o", "json")
			var in policytool.InspectResult
			if code != 0 || json.Unmarshal([]byte(stdout), &in) != nil || in.Language != tc.lang {
				t.Fatalf("inspect: exit %d %s %s", code, stdout, errs)
			}
		})
	}
	// a C policy with its native test beside it: the test is not built in
	cdir := t.TempDir()
	copyFile(t, "../../plugins/c/wait/wait.c", filepath.Join(cdir, "wait.c"))
	if err := os.WriteFile(filepath.Join(cdir, "wait_test.c"), []byte("#include \"wait.c\"\n#include \"wasmsched_test.h\"\nint main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, errs := noRedis(t, "policy", "build", cdir, "--out", filepath.Join(cdir, "w.wasm"), "-o", "json"); code != 0 || !strings.Contains(stdout, `"language": "c"`) {
		t.Fatalf("build of a C dir with a _test.c: exit %d %s %s", code, stdout, errs)
	}
	// a Rust crate whose Cargo.lock a newer cargo wrote (version 4): built,
	// and the lock file is as it was
	sdk, _ := filepath.Abs("../../abi/rust")
	rdir := t.TempDir()
	for name, body := range map[string]string{
		"Cargo.toml": "[package]\nname = \"oldest\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\ncrate-type = [\"cdylib\"]\n" +
			"[dependencies]\nwasmsched-sdk = { path = \"" + sdk + "\" }\n[profile.release]\npanic = \"abort\"\nstrip = \"symbols\"\n",
		"src/lib.rs": "#![no_std]\nuse wasmsched_sdk::{Decision, SerialPolicy, Snapshot};\npub struct Oldest;\n" +
			"impl SerialPolicy for Oldest {\n    fn decide(s: &Snapshot, d: &mut Decision) {\n" +
			"        for r in s.waiting().take(s.max_active() as usize) { d.launch(&r, \"oldest\"); }\n    }\n}\n" +
			"wasmsched_sdk::serial_policy!(Oldest);\n",
		"Cargo.lock": "# This file is automatically @generated by Cargo.\nversion = 4\n\n[[package]]\nname = \"oldest\"\nversion = \"0.1.0\"\n" +
			"dependencies = [\n \"wasmsched-sdk\",\n]\n\n[[package]]\nname = \"wasmsched-sdk\"\nversion = \"0.2.0\"\n",
	} {
		p := filepath.Join(rdir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lock, _ := os.ReadFile(filepath.Join(rdir, "Cargo.lock"))
	code, stdout, errs := noRedis(t, "policy", "build", rdir, "--out", filepath.Join(rdir, "o.wasm"), "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"language": "rust"`) {
		t.Fatalf("build of a crate with a version-4 Cargo.lock: exit %d %s %s", code, stdout, errs)
	}
	if after, _ := os.ReadFile(filepath.Join(rdir, "Cargo.lock")); !bytes.Equal(after, lock) {
		t.Fatalf("Cargo.lock changed by the build:\n%s", after)
	}
	code, _, errs = noRedis(t, "policy", "build", "../../plugins/c/wait", "--lang", "cobol")
	if code != 2 || !strings.Contains(errs, `want go, rust, c or assemblyscript`) {
		t.Fatalf("--lang cobol: exit %d %s", code, errs)
	}
	// an AssemblyScript compile error: exit 2 with the compiler's words
	asDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(asDir, "assembly"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(asDir, "assembly", "index.ts"), []byte("export function f(): i32 { return nope; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err == nil {
		code, _, errs = noRedis(t, "policy", "build", asDir, "--asc", asc, "--out", filepath.Join(asDir, "w.wasm"))
		if code != 2 || !strings.Contains(errs, "build") || !strings.Contains(errs, "nope") {
			t.Fatalf("an AssemblyScript compile error: exit %d %s", code, errs)
		}
	}
	// without a compiler: exit 2 saying how to get one, nothing written
	t.Setenv("PATH", t.TempDir())
	code, _, errs = noRedis(t, "policy", "build", asDir, "--out", filepath.Join(asDir, "w.wasm"))
	if _, err := os.Stat(filepath.Join(asDir, "w.wasm")); code != 2 || !strings.Contains(errs, "no AssemblyScript compiler: run `npm install --save-dev --save-exact assemblyscript@") || err == nil {
		t.Fatalf("an AssemblyScript build without asc: exit %d %s", code, errs)
	}
	// a Go plugin says go
	code, stdout, _ = noRedis(t, "policy", "inspect", "../../plugins/wait/wait.wasm", "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"language": "go"`) {
		t.Fatalf("inspect of a Go plugin: %s", stdout)
	}
}

// TestPolicyHelp_current: the help names the ABI versions this build runs
// and the flags that exist (--out, not -o, names the output file).
func TestPolicyHelp_current(t *testing.T) {
	want := fmt.Sprintf("%d to %d", abi.MinVersion, abi.Version)
	for _, args := range [][]string{{"policy", "--help"}, {"policy", "push", "--help"}} {
		var out, errb bytes.Buffer
		resetCommandFlags()
		if code := run(context.Background(), append([]string{"wasmsched"}, args...), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errb.String())
		}
		help := out.String()
		if !strings.Contains(help, want) || strings.Contains(help, "ABI v1") || strings.Contains(help, "-o mypolicy.wasm") {
			t.Errorf("%v: the help does not name ABI %s, or names ABI v1 or -o FILE:\n%s", args, want, help)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
