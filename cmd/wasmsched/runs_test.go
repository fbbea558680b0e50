package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/recordtest"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

// cliEnv is one redis-server and namespace for CLI tests.
type cliEnv struct {
	t   *testing.T
	srv *redistest.Server
	url string
	ns  string
	rdb redis.UniversalClient // the test's own client, for fault injection
	st  *storage.Store
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	srv := redistest.Start(t)
	ns := "clitest"
	rdb := srv.Client(t)
	st, err := storage.New(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	return &cliEnv{t: t, srv: srv, url: srv.URL(), ns: ns, rdb: rdb, st: st}
}

var (
	origFlagsOnce sync.Once
	origFlags     = map[*cli.Command][]cli.Flag{}
)

// resetCommandFlags undoes withGlobalFlags' appends from an earlier run in
// this process (main.go appends the global flags to the shared command
// values on every newApp, so a second run panics with "flag redefined").
// It is a no-op once newApp no longer mutates the shared commands.
func resetCommandFlags() {
	var walk func(cs []*cli.Command, record bool)
	walk = func(cs []*cli.Command, record bool) {
		for _, c := range cs {
			if record {
				origFlags[c] = append([]cli.Flag(nil), c.Flags...)
			} else {
				c.Flags = append([]cli.Flag(nil), origFlags[c]...)
			}
			walk(c.Subcommands, record)
		}
	}
	origFlagsOnce.Do(func() { walk(commands, true) })
	walk(commands, false)
}

// cli runs wasmsched with the env's --redis/--namespace (after the command)
// and returns exit code, stdout, stderr.
func (e *cliEnv) cli(args ...string) (int, string, string) {
	e.t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"wasmsched"}, args...)
	full = append(full, "--redis", e.url, "--namespace", e.ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resetCommandFlags()
	code := run(ctx, full, &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs the command, requires exit 0 and decodes its json stdout into v.
func (e *cliEnv) ok(v any, args ...string) string {
	e.t.Helper()
	code, out, errs := e.cli(append(args, "-o", "json")...)
	if code != 0 {
		e.t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			e.t.Fatalf("%v: bad json %q: %v", args, out, err)
		}
	}
	return out
}

// usage requires exit 2, empty stdout and a stderr naming want.
func (e *cliEnv) usage(want string, args ...string) {
	e.t.Helper()
	code, out, errs := e.cli(args...)
	if code != 2 {
		e.t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errs)
	}
	if out != "" {
		e.t.Errorf("%v: wrote to stdout: %q", args, out)
	}
	if !strings.Contains(errs, want) {
		e.t.Errorf("%v: stderr %q does not mention %q", args, errs, want)
	}
}

// lead makes the test the namespace's leader (lock and fence) and returns
// its fence, to play the leader by hand.
func (e *cliEnv) lead() storage.Fence {
	e.t.Helper()
	ctx := context.Background()
	stamp := "leader:1#1#bb"
	if err := e.rdb.Set(ctx, keyspace.Of(e.st).Lock(), stamp, time.Hour).Err(); err != nil {
		e.t.Fatal(err)
	}
	epoch, err := e.st.BecomeLeader(ctx, stamp)
	if err != nil {
		e.t.Fatal(err)
	}
	return storage.Fence{Epoch: epoch, Holder: stamp}
}

// submitLaunched submits run id to group and, as the leader of fence,
// launches it (LAUNCHED: no worker takes it until one registers).
func (e *cliEnv) submitLaunched(fence storage.Fence, group, id string) {
	e.t.Helper()
	ctx := context.Background()
	e.ok(nil, "submit", group, "--id", id)
	sn, err := e.st.Snapshot(ctx, group)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, fence, group, storage.Decision{Version: sn.Group.Version, ClaimID: "c-" + id, Policy: "wait", PolicyVersion: "v",
		Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: id}}}); err != nil {
		e.t.Fatal(err)
	}
}

// okText runs args (table output) and returns stdout, failing on exit != 0.
func (e *cliEnv) okText(args ...string) string {
	e.t.Helper()
	code, out, errs := e.cli(args...)
	if code != 0 {
		e.t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
	}
	return out
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func wantKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	if len(m) != len(keys) {
		t.Errorf("%s: keys %v, want exactly %v", what, keysOf(m), keys)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: missing key %q in %v", what, k, m)
		}
	}
}

func TestCLIGroupSubmitRuns(t *testing.T) {
	e := newCLIEnv(t)

	var g map[string]any
	e.ok(&g, "group", "set", "nightly", "--policy", "wait", "--max-active", "2")
	if g["name"] != "nightly" || g["policy"] != "wait" || g["max_active"] != float64(2) {
		t.Errorf("group set: %v", g)
	}
	// Changing only max_active keeps the policy.
	e.ok(&g, "group", "set", "nightly", "--max-active", "3")
	if g["policy"] != "wait" || g["max_active"] != float64(3) {
		t.Errorf("group set --max-active: %v", g)
	}
	e.ok(&g, "group", "show", "nightly")
	if g["name"] != "nightly" || g["max_active"] != float64(3) {
		t.Errorf("group show: %v", g)
	}
	e.ok(nil, "group", "set", "etl", "--policy", "discard")
	var gs []map[string]any
	e.ok(&gs, "group", "list")
	if len(gs) != 2 {
		t.Fatalf("group list: %v", gs)
	}

	var sub map[string]any
	e.ok(&sub, "submit", "nightly", "--slots", "2", "--priority", "5", "--payload", "hello", "--duration", "10s")
	if sub["group"] != "nightly" || sub["state"] != "WAITING" || sub["seq"] == float64(0) {
		t.Errorf("submit: %v", sub)
	}
	id1 := sub["id"].(string)
	e.ok(&sub, "submit", "etl", "--id", "etl-1")
	if sub["id"] != "etl-1" {
		t.Errorf("submit --id: %v", sub)
	}

	var rs []map[string]any
	e.ok(&rs, "runs")
	if len(rs) != 2 {
		t.Fatalf("runs: %v", rs)
	}
	for _, r := range rs {
		if r["started_at"] != nil || r["finished_at"] != nil {
			t.Errorf("waiting run has times: %v", r)
		}
		if _, err := time.Parse(time.RFC3339, r["submitted_at"].(string)); err != nil {
			t.Errorf("submitted_at not RFC 3339: %v", err)
		}
	}
	e.ok(&rs, "runs", "--group", "nightly", "--state", "waiting")
	if len(rs) != 1 || rs[0]["id"] != id1 || rs[0]["slots"] != float64(2) || rs[0]["priority"] != float64(5) {
		t.Errorf("runs --group nightly: %v", rs)
	}
	e.ok(&rs, "runs", "--state", "RUNNING")
	if len(rs) != 0 {
		t.Errorf("runs --state RUNNING: %v", rs)
	}
	e.ok(&rs, "runs", "--limit", "1")
	if len(rs) != 1 {
		t.Errorf("runs --limit 1: %v", rs)
	}

	var show map[string]any
	e.ok(&show, "run", "show", id1)
	if as, ok := show["assignments"].([]any); !ok || len(as) != 0 {
		t.Errorf("run show assignments of a waiting run: %v", show["assignments"])
	}

	// A WAITING run is discarded by stop; stopping it again is an error.
	var stopped map[string]any
	e.ok(&stopped, "run", "stop", id1, "--reason", "not needed")
	if stopped["state"] != "DISCARDED" {
		t.Errorf("run stop of a waiting run: %v", stopped)
	}
	e.usage("run "+id1+" is DISCARDED", "run", "stop", id1)

	// Table output works too.
	code, out, _ := e.cli("runs")
	if code != 0 || !strings.Contains(out, "etl-1") || !strings.Contains(out, "STATE") {
		t.Errorf("runs table: %d %q", code, out)
	}
}

func TestCLISlots(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	if err := e.st.RegisterWorker(ctx, "w1:7070#1#aa", 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	e.ok(&v, "slots")
	if v["free"] != float64(2) || v["assigned"] != float64(0) {
		t.Errorf("slots totals: %v", v)
	}
	ws := v["workers"].([]any)
	if len(ws) != 1 {
		t.Fatalf("slots workers: %v", ws)
	}
	w := ws[0].(map[string]any)
	if w["identity"] != "w1:7070#1#aa" || w["alive"] != true {
		t.Errorf("worker: %v", w)
	}
	sl := w["slots"].([]any)
	if len(sl) != 2 {
		t.Fatalf("slots: %v", sl)
	}
	s0 := sl[0].(map[string]any)
	if s0["index"] != float64(0) || s0["run"] != "" || s0["token"] != "" {
		t.Errorf("slot 0: %v", s0)
	}
	// An unknown namespace is bad input, as for runs and group list.
	empty := *e
	empty.ns = "empty"
	empty.usage("namespace empty does not exist", "slots")
	empty.usage("namespace empty does not exist", "leader")
}

func TestCLIBadInput(t *testing.T) {
	e := newCLIEnv(t)
	e.ok(nil, "group", "set", "g1")
	e.usage("group nope not found", "group", "show", "nope")
	e.usage("slots -1 is negative", "submit", "g1", "--slots", "-1")
	e.usage("--slots 0: a run needs at least 1 slot", "submit", "g1", "--slots", "0")
	e.usage("slots 100000: at most 1024", "submit", "g1", "--slots", "100000")
	e.usage("duration -1s is negative", "submit", "g1", "--duration", "-1s")
	e.usage("flag provided but not defined: --bogus (see wasmsched runs --help)", "runs", "--bogus")
	e.usage("flag provided but not defined: --bogus (see wasmsched group set --help)", "group", "set", "g", "--bogus")
	e.usage("valid states: WAITING", "runs", "--state", "SLEEPING")
	e.usage("--limit must be >= 0", "runs", "--limit", "-3")
	e.usage(`"a{b}"`, "group", "set", "a{b}")
	e.usage(`"a{b}"`, "submit", "a{b}")
	e.usage(`"a{b}"`, "group", "show", "a{b}")
	e.usage(`"a{b}"`, "runs", "--group", "a{b}")
	e.usage(`"r{1}"`, "run", "show", "r{1}")
	e.usage(`"r{1}"`, "submit", "g1", "--id", "r{1}")
	e.usage("--max-active 0: a group runs at least 1 (leave the flag out to keep the current value)", "group", "set", "g1", "--max-active", "0")
	e.usage("--window 0: a policy sees at least 1 run", "group", "set", "g1", "--window", "0")
	e.usage("--retention: retention \"-1h\": want a duration (36h), whole days (7d) or forever, or default", "group", "set", "g1", "--retention", "-1h")
	e.usage("--retention: retention \"xd\": want a duration (36h), whole days (7d) or forever, or default", "group", "set", "g1", "--retention", "xd")
	e.usage("run nosuch not found in namespace clitest (expired or never existed)", "run", "show", "nosuch")
	// The ranges are storage's (checked once, before anything is written).
	e.usage("group g1: max_active 10001 is outside 1 to 10000", "group", "set", "g1", "--max-active", "10001")
	e.usage("group g1: window 10001 is outside 1 to 10000", "group", "set", "g1", "--window", "10001")
	e.usage("group g1: max_active -2 is outside 1 to 10000", "group", "set", "g1", "--max-active", "-2")
	e.usage("run r404 not found", "run", "show", "r404")
	e.usage("run r404 not found", "run", "stop", "r404")
	e.usage("want 1 argument(s)", "run", "show")
	e.usage("want 1 argument(s)", "submit")
	e.usage(`-o "yaml"`, "group", "list", "-o", "yaml")
	// API flags: an open API only on loopback, a readable token file.
	e.usage("--api-addr 0.0.0.0:0 is not a loopback address: give --api-tokens FILE", "serve", "--admin-addr", "", "--api-addr", "0.0.0.0:0")
	e.usage("--api-tokens without --api-addr", "serve", "--admin-addr", "", "--api-tokens", "/nonexistent")
	e.usage("--api-tokens: tokens: open /nonexistent", "serve", "--admin-addr", "", "--api-addr", "127.0.0.1:0", "--api-tokens", "/nonexistent")
	badTok := filepath.Join(e.t.TempDir(), "tokens")
	if err := os.WriteFile(badTok, []byte("sixteen-chars-long-token superuser\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.usage(`scope "superuser": want read, admin or worker`, "serve", "--admin-addr", "", "--api-addr", "127.0.0.1:0", "--api-tokens", badTok)
	// Worker flags are checked before anything connects.
	e.usage("exactly one of --simulate or --exec", "worker", "--advertise", "w:1")
	e.usage("exactly one of --simulate or --exec", "worker", "--advertise", "w:1", "--simulate", "--exec", "/bin/true")
	e.usage("--slots must be >= 1, got 0", "worker", "--advertise", "w:1", "--simulate", "--slots", "0")
	e.usage("--advertise ADDR is required", "worker", "--simulate")
	e.usage(`--advertise "w#1"`, "worker", "--simulate", "--advertise", "w#1")
	e.usage("--heartbeat-ttl must be >= 30ms", "worker", "--simulate", "--advertise", "w:1", "--heartbeat-ttl", "1ms")

	// Nothing was written by the bad inputs.
	var rs []map[string]any
	e.ok(&rs, "runs")
	if len(rs) != 0 {
		t.Errorf("bad input wrote runs: %v", rs)
	}
	var gs []map[string]any
	e.ok(&gs, "group", "list")
	if len(gs) != 1 {
		t.Errorf("bad input wrote groups: %v", gs)
	}
	var g1 struct {
		MaxActive int   `json:"max_active"`
		Version   int64 `json:"version"`
	}
	e.ok(&g1, "group", "show", "g1")
	if g1.MaxActive != 1 || g1.Version != 1 {
		t.Errorf("bad input changed g1: max_active %d, version %d; want 1, 1", g1.MaxActive, g1.Version)
	}
}

func TestCLIHelp(t *testing.T) {
	e := &cliEnv{t: t, url: "redis://127.0.0.1:1/0", ns: "x"}
	for _, args := range [][]string{
		{"worker", "--help"}, {"group", "set", "--help"}, {"group", "show", "--help"}, {"submit", "--help"},
		{"runs", "--help"}, {"run", "show", "--help"}, {"run", "stop", "--help"}, {"slots", "--help"},
	} {
		code, out, errs := e.cli(args...)
		if code != 0 || !strings.Contains(out, "Examples:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

func TestCLIRunShowAssignmentsAndStop(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	const wid = "w1:7070#1#aa"
	if err := e.st.RegisterWorker(ctx, wid, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Play the leader: launch and allocate a 2-slot run.
	fence := e.lead()
	epoch := fence.Epoch
	var sub map[string]any
	code, out, errs := e.cli("submit", "g", "--slots", "2", "--id", "r1", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &sub) != nil {
		t.Fatalf("submit: %d %q %q", code, out, errs)
	}
	sn, err := e.st.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, fence, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c1", Policy: "wait",
		PolicyVersion: "v1", PolicySHA256: "v1full", Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r1", Reason: "oldest"}}}); err != nil {
		t.Fatal(err)
	}
	r1, err := e.st.GetRun(ctx, "r1") // the apply placed it on the worker's slots
	if err != nil {
		t.Fatal(err)
	}
	as := r1.Assignments

	var show map[string]any
	e.ok(&show, "run", "show", "r1")
	if show["state"] != "RUNNING" || show["policy"] != "wait" || show["policy_version"] != "v1" || show["started_at"] == nil {
		t.Errorf("run show: %v", show)
	}
	dec, _ := show["decision"].(map[string]any)
	if dec == nil || dec["id"] != "c1" || dec["epoch"] != float64(epoch) || dec["action"] != "launch" || dec["reason"] != "oldest" ||
		dec["policy_sha256"] != "v1full" || dec["policy_registry"] != float64(0) || dec["at"] == nil {
		t.Errorf("run show decision: %v", dec)
	}
	table := e.okText("run", "show", "r1")
	if !strings.Contains(table, "DECISION") || !strings.Contains(table, "c1 (epoch") || !strings.Contains(table, "oldest") {
		t.Errorf("run show table lacks the decision:\n%s", table)
	}
	var gs client.Group
	e.ok(&gs, "group", "show", "g")
	if len(gs.Decisions) != 1 || gs.Decisions[0].ID != "c1" || gs.Decisions[0].Launched != 1 {
		t.Errorf("group show decisions: %+v", gs.Decisions)
	}
	got := show["assignments"].([]any)
	if len(got) != 2 {
		t.Fatalf("assignments: %v", got)
	}
	a0 := got[0].(map[string]any)
	wantKeys(t, "assignment", a0, "worker", "slot", "token", "task")
	if a0["worker"] != wid || a0["token"] != as[0].Token || a0["slot"] != float64(as[0].Slot) {
		t.Errorf("assignment 0: %v, want %+v", a0, as[0])
	}
	var v map[string]any
	e.ok(&v, "slots")
	if v["free"] != float64(0) || v["assigned"] != float64(2) {
		t.Errorf("slots: %v", v)
	}

	// The worker finishes it; stopping a finished run is exit 2.
	if err := e.st.Report(ctx, wid, "r1", as[0].Token, storage.StateSucceeded, ""); err != nil {
		t.Fatal(err)
	}
	e.usage("run r1 is SUCCEEDED", "run", "stop", "r1")

	// Global flags before the command name.
	var out2, err2 bytes.Buffer
	resetCommandFlags()
	if code := run(ctx, []string{"wasmsched", "--redis", e.url, "-n", e.ns, "-o", "json", "run", "show", "r1"}, &out2, &err2); code != 0 {
		t.Fatalf("global flags first: %d %s", code, err2.String())
	}
	if !strings.Contains(out2.String(), `"state": "SUCCEEDED"`) || !strings.Contains(out2.String(), `"finished_at": "`) {
		t.Errorf("run show: %s", out2.String())
	}
}

// TestCLIGroupSet_retention: group set --retention takes durations, whole
// days, 0 (forever) and "default", keeps the other settings, and group
// show reports it.
func TestCLIGroupSet_retention(t *testing.T) {
	e := newCLIEnv(t)
	var g client.Group
	e.ok(&g, "group", "set", "g", "--max-active", "3")
	for _, c := range []struct{ arg, want string }{{"36h", "36h0m0s"}, {"7d", "168h0m0s"}, {"0", "forever"}, {"default", "default"}} {
		e.ok(&g, "group", "set", "g", "--retention", c.arg)
		if g.Retention != c.want || g.MaxActive != 3 {
			t.Errorf("--retention %s: retention %q max_active %d, want %q and 3 kept", c.arg, g.Retention, g.MaxActive, c.want)
		}
	}
	e.ok(nil, "group", "set", "g", "--retention", "2h")
	e.ok(&g, "group", "show", "g")
	if g.Retention != "2h0m0s" {
		t.Errorf("group show: retention %q", g.Retention)
	}
}

// TestCLIRuns_pages: runs --limit lists one page and names the next on
// stderr; --after SEQ continues below that seq; the last page has no
// hint; --after 0 or negative is exit 2.
func TestCLIRuns_pages(t *testing.T) {
	e := newCLIEnv(t)
	for i := range 5 {
		e.ok(nil, "submit", "g", "--id", fmt.Sprintf("r%d", i))
	}
	code, out, errs := e.cli("runs", "--limit", "2", "-o", "json")
	var page []client.Run
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page) != 2 || page[0].ID != "r4" || page[1].ID != "r3" {
		t.Fatalf("first page: exit %d %q", code, out)
	}
	hint := fmt.Sprintf("the next page: wasmsched runs --limit 2 --after %d", page[1].Seq)
	if !strings.Contains(errs, hint) {
		t.Fatalf("stderr %q lacks %q", errs, hint)
	}
	code, out, errs = e.cli("runs", "--limit", "2", "--after", fmt.Sprint(page[1].Seq), "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page) != 2 || page[0].ID != "r2" || !strings.Contains(errs, "--after") {
		t.Fatalf("second page: exit %d %q %q", code, out, errs)
	}
	code, out, errs = e.cli("runs", "--limit", "2", "--after", fmt.Sprint(page[1].Seq), "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page) != 1 || page[0].ID != "r0" || errs != "" {
		t.Fatalf("last page: exit %d %q stderr %q (want no hint)", code, out, errs)
	}
	e.usage("--after must be a seq >= 1, got 0", "runs", "--after", "0")
	e.usage("--after must be a seq >= 1, got -3", "runs", "--after", "-3")
}

// TestCLIRunExplain: for a waiting run, run explain names its place, the
// active runs ahead and max_active, the group's policy, and what the policy
// decides for it now (read-only: nothing written); for a launched run the
// decision that moved it; an unknown run is exit 2.
func TestCLIRunExplain(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	fence := e.lead()
	for _, id := range []string{"r1", "r2", "r3"} {
		e.ok(nil, "submit", "g", "--id", id)
	}
	sn, err := e.st.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, fence, "g", storage.Decision{Version: sn.Group.Version,
		ClaimID: "c1", Policy: "wait", PolicyVersion: "v", Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r1", Reason: "oldest"}}}); err != nil {
		t.Fatal(err)
	}
	var ex client.Explanation
	before := dumpNamespace(t, e)
	e.ok(&ex, "run", "explain", "r3")
	if ex.Run.State != "WAITING" || ex.Ahead != 1 || ex.Place != 2 || ex.Waiting != 2 || len(ex.Active) != 1 || ex.Active[0].ID != "r1" ||
		ex.MaxActive != 1 || ex.Now != "" || !strings.Contains(ex.Policy, "wait") || !strings.Contains(ex.Why, "1 active runs of max_active 1") {
		t.Fatalf("explain r3: %+v", ex)
	}
	if after := dumpNamespace(t, e); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("run explain wrote to the namespace")
	}
	table := e.okText("run", "explain", "r3")
	for _, want := range []string{"PLACE", "2 of 2 waiting (1 = next)", "r1 LAUNCHED", "no action for it", "WHY"} {
		if !strings.Contains(table, want) {
			t.Errorf("explain table lacks %q:\n%s", want, table)
		}
	}
	e.ok(&ex, "run", "explain", "r1")
	if ex.Run.State != "LAUNCHED" || !strings.Contains(ex.Why, "launch by decision c1") || !strings.Contains(ex.Why, "oldest") ||
		!strings.Contains(ex.Why, "waiting for slots: it needs 1 slot(s), 0 free; 0 launched run(s) ahead") ||
		!strings.Contains(ex.Why, "slot guard (serve --slot-guard, default 30s)") {
		t.Fatalf("explain r1 (no worker: it waits for slots): %+v", ex)
	}
	e.ok(nil, "group", "set", "g", "--policy", "discard")
	e.ok(&ex, "run", "explain", "r3")
	if ex.Now != "discard" || !strings.Contains(ex.Why, "discards it") {
		t.Fatalf("explain r3 under discard: %+v", ex)
	}
	e.usage("run nosuch not found in namespace clitest (expired or never existed)", "run", "explain", "nosuch")
}

// TestCLIRunExplain_allocationLeftOut: a launched run that the namespace's
// allocation policy leaves out of its order (an empty order) is explained
// as such, not only as "needs 1, 1 free"; under fifo it is not.
func TestCLIRunExplain_allocationLeftOut(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	e.submitLaunched(e.lead(), "g", "r1")
	if err := e.st.RegisterWorker(ctx, "w1", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	var ex client.Explanation
	e.ok(&ex, "run", "explain", "r1")
	if ex.Run.State != "LAUNCHED" || !strings.Contains(ex.Why, "it needs 1 slot(s), 1 free") || strings.Contains(ex.Why, "leaves this run out") {
		t.Fatalf("explain r1 under fifo: %+v", ex)
	}
	e.ok(nil, "policy", "push", "hostile", "../../policies/testdata/hostile-alloc/hostile-alloc.wasm")
	e.ok(nil, "namespace", "set", "--allocate", "hostile", "--param", "mode=empty")
	e.ok(&ex, "run", "explain", "r1")
	if !strings.Contains(ex.Why, "allocation policy hostile v1 leaves this run out of its order now") ||
		!strings.Contains(ex.Why, fmt.Sprintf("after %d passes in a row", host.MaxIdleAllocationPasses)) {
		t.Fatalf("explain r1 under an empty order: %+v", ex)
	}
	e.ok(nil, "namespace", "set", "--param", "mode=reverse")
	e.ok(&ex, "run", "explain", "r1")
	if strings.Contains(ex.Why, "leaves this run out") {
		t.Fatalf("explain r1 under an order that has it: %+v", ex)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCLIRuns_watch: runs --watch prints the page, then each change of a
// matching run as it happens (pushed, not polled), one JSON line each,
// and exits 0 when interrupted.
func TestCLIRuns_watch(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	e.ok(nil, "submit", "g", "--id", "old")
	e.ok(nil, "submit", "other", "--id", "x0")
	var out, errb syncBuffer
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resetCommandFlags()
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, []string{"wasmsched", "runs", "--group", "g", "--watch", "-o", "json", "--redis", e.url, "--namespace", e.ns}, &out, &errb)
	}()
	lines := func(n int) []client.Run {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var rs []client.Run
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var ev client.Event
				if l != "" && json.Unmarshal([]byte(l), &ev) == nil {
					ev.Run.State = ev.State // the state the change entered
					rs = append(rs, ev.Run)
				}
			}
			if len(rs) >= n {
				return rs
			}
			if time.Now().After(deadline) {
				t.Fatalf("watch printed %d runs, want %d: %q (stderr %q)", len(rs), n, out.String(), errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if rs := lines(1); rs[0].ID != "old" || rs[0].State != "WAITING" {
		t.Fatalf("page = %+v", rs)
	}
	// the watch is subscribed once the page is printed: changes follow
	for _, id := range []string{"new", "x1"} {
		g := "g"
		if id == "x1" {
			g = "other" // filtered out
		}
		if _, err := e.st.Submit(ctx, storage.SubmitRequest{Group: g, ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.st.RequestStop(ctx, "old", "operator"); err != nil {
		t.Fatal(err)
	}
	rs := lines(3)
	got := []string{}
	for _, r := range rs {
		got = append(got, r.ID+":"+r.State)
	}
	if want := "old:WAITING new:WAITING old:DISCARDED"; strings.Join(got, " ") != want {
		t.Fatalf("watch printed %v, want %s", got, want)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("interrupted watch: exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end on interrupt")
	}
}

// TestCLIRuns_cursor: the hint names an opaque cursor too; --cursor
// continues the listing with its filters; a bad or mismatched cursor is
// exit 2.
func TestCLIRuns_cursor(t *testing.T) {
	e := newCLIEnv(t)
	for i := range 5 {
		e.ok(nil, "submit", "g", "--id", fmt.Sprintf("r%d", i))
	}
	e.ok(nil, "submit", "k", "--id", "k0")
	code, _, errs := e.cli("runs", "--group", "g", "--limit", "2")
	m := regexp.MustCompile(`--cursor (\S+) --limit 2`).FindStringSubmatch(errs)
	if code != 0 || m == nil {
		t.Fatalf("first page: exit %d, stderr %q has no cursor", code, errs)
	}
	var seen []string
	cur := m[1]
	for cur != "" {
		var page []client.Run
		code, out, errs := e.cli("runs", "--cursor", cur, "--limit", "2", "-o", "json")
		if code != 0 || json.Unmarshal([]byte(out), &page) != nil {
			t.Fatalf("cursor page: exit %d %q %q", code, out, errs)
		}
		for _, r := range page {
			seen = append(seen, r.ID)
		}
		cur = ""
		if m := regexp.MustCompile(`--cursor (\S+)`).FindStringSubmatch(errs); m != nil {
			cur = m[1]
		}
	}
	if want := "r2 r1 r0"; strings.Join(seen, " ") != want {
		t.Fatalf("cursor pages listed %v, want %s (group g only, no repeat)", seen, want)
	}
	e.usage("--cursor: cursor", "runs", "--cursor", "nonsense")
	e.usage("--cursor continues a listing of group \"g\", not --group \"k\"", "runs", "--cursor", m[1], "--group", "k")
	e.usage("--cursor and --after both name a page", "runs", "--cursor", m[1], "--after", "3")
}

// TestCLISubmit_idempotencyKey: the same key twice prints the same run;
// the key reused for another request is a conflict (exit 1) naming it.
func TestCLISubmit_idempotencyKey(t *testing.T) {
	e := newCLIEnv(t)
	var a, b client.Run
	e.ok(&a, "submit", "g", "--idempotency-key", "ci-42", "--payload", "p")
	e.ok(&b, "submit", "g", "--idempotency-key", "ci-42", "--payload", "p")
	if a.ID == "" || a.ID != b.ID || a.Seq != b.Seq {
		t.Fatalf("two submits with one key: %+v and %+v", a, b)
	}
	for _, args := range [][]string{
		{"submit", "other", "--idempotency-key", "ci-42", "--payload", "p"},
		{"submit", "g", "--idempotency-key", "ci-42", "--payload", "q"},
		{"submit", "g", "--idempotency-key", "ci-42", "--payload", "p", "--id", "mine"},
	} {
		code, out, errs := e.cli(args...)
		if code != 1 || out != "" || !strings.Contains(errs, "the idempotency key was used for run "+a.ID+" (group g) with another request") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want exit 1 naming run %s", args, code, out, errs, a.ID)
		}
	}
	e.usage("idempotency key is 257 bytes, at most 256", "submit", "g", "--idempotency-key", strings.Repeat("k", 257))
}

// TestCLIRecords_goldens: the CLI's -o json of every record is the shared
// golden the Go client's and the HTTP API's tests check (internal/recordtest).
func TestCLIRecords_goldens(t *testing.T) {
	e := newCLIEnv(t)
	e.ns = recordtest.Namespace
	st, err := storage.New(e.rdb, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	wasm, _ := plugins.Builtin("wait")
	recordtest.Fixture(t, context.Background(), st, wasm)
	recordtest.Check(t, "run", []byte(e.ok(nil, "run", "show", recordtest.Running)))
	recordtest.Check(t, "group", []byte(e.ok(nil, "group", "show", recordtest.Group)))
	recordtest.Check(t, "groups", []byte(e.ok(nil, "group", "list")))
	recordtest.Check(t, "slots", []byte(e.ok(nil, "slots")))
	recordtest.Check(t, "leader", []byte(e.ok(nil, "leader")))
	recordtest.Check(t, "explanation", []byte(e.ok(nil, "run", "explain", recordtest.Waiting)))
	recordtest.Check(t, "schedule", []byte(e.ok(nil, "schedule", "show", recordtest.Schedule)))
	var ps []json.RawMessage
	e.ok(&ps, "policy", "list", recordtest.Policy)
	if len(ps) != 1 {
		t.Fatalf("policy list %s: %d records", recordtest.Policy, len(ps))
	}
	recordtest.Check(t, "policy", ps[0])
	var rs []json.RawMessage
	e.ok(&rs, "runs", "--group", recordtest.Group, "--limit", "2")
	if len(rs) != 2 {
		t.Fatalf("runs: %d records", len(rs))
	}
	recordtest.Check(t, "run", rs[1]) // newest first: r2, r1
}

// TestCLIRuns_watchTable: --watch rows are aligned with the header, show
// each state a run enters once (LAUNCHED before RUNNING, not RUNNING
// twice), and a restart of redis-server is noticed: the watch says so and
// lists the page again under a header.
func TestCLIRuns_watchTable(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	e.ok(nil, "submit", "g", "--id", "w1")
	if err := e.st.RegisterWorker(ctx, "wk:1#1#aa", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	var out, errb syncBuffer
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resetCommandFlags()
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, []string{"wasmsched", "runs", "--watch", "--redis", e.url, "--namespace", e.ns}, &out, &errb)
	}()
	waitOut := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("watch: no %s in %q (stderr %q)", what, out.String(), errb.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitOut("page", func(s string) bool { return strings.Contains(s, "w1") })
	f := e.lead()
	sn, err := e.st.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c1", Policy: "wait", PolicyVersion: "v",
		Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "w1"}}}); err != nil {
		t.Fatal(err)
	} // the apply places w1: LAUNCHED and RUNNING in one message
	waitOut("RUNNING row", func(s string) bool { return strings.Contains(s, "RUNNING") })
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	states := []string{}
	stateCol := strings.Index(rows[0], "STATE")
	for _, r := range rows[1:] {
		if len(r) <= stateCol || strings.Index(r, "w1") != 0 {
			t.Fatalf("row %q is not aligned with the header %q", r, rows[0])
		}
		states = append(states, strings.Fields(r[stateCol:])[0])
	}
	if got := strings.Join(states, " "); got != "WAITING LAUNCHED RUNNING" {
		t.Fatalf("watch rows show states %q, want WAITING LAUNCHED RUNNING:\n%s", got, out.String())
	}
	e.srv.Restart(t)
	waitOut("page listed again", func(s string) bool { return strings.Count(s, "STATE") == 2 })
	if !strings.Contains(errb.String(), "Redis connection dropped and came back") {
		t.Fatalf("the restart went unnoticed: stderr %q", errb.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("interrupted watch: exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end on interrupt")
	}
}

// TestCLILabels: --label on submit (repeatable, before or after G, a value
// with a comma kept whole), runs --label selects by them, run show lists
// them; group set --param sets, merges and removes; bad ones exit 2
// naming the pair, with nothing written.
func TestCLILabels(t *testing.T) {
	e := newCLIEnv(t)
	var a, b client.Run
	e.ok(&a, "submit", "g", "--id", "a", "--label", "ref=main", "-l", "note=one, two")
	e.ok(&b, "submit", "--label", "ref=dev", "g", "--id", "b")
	if a.Labels["note"] != "one, two" || a.Labels["ref"] != "main" || b.Labels["ref"] != "dev" {
		t.Fatalf("labels %v, %v", a.Labels, b.Labels)
	}
	var rs []client.Run
	e.ok(&rs, "runs", "--label", "ref=main")
	if len(rs) != 1 || rs[0].ID != "a" {
		t.Fatalf("runs --label ref=main: %+v", rs)
	}
	if _, out, _ := e.cli("run", "show", "a"); !strings.Contains(out, "note=one, two ref=main") {
		t.Fatalf("run show: %s", out)
	}
	var g client.Group
	e.ok(&g, "group", "set", "g", "--param", "period=2s", "--param", "max_wait=30s")
	g = client.Group{} // (decoding into a map merges)
	e.ok(&g, "group", "set", "g", "--param", "max_wait=")
	if len(g.Params) != 1 || g.Params["period"] != "2s" {
		t.Fatalf("params %v", g.Params)
	}
	if _, out, _ := e.cli("group", "show", "g"); !strings.Contains(out, "period  2s") {
		t.Fatalf("group show: %s", out)
	}
	dump := func() string { // every key and its type and size: what a write would change
		keys, _ := e.rdb.Keys(context.Background(), "*").Result()
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %s\n", k, e.rdb.Dump(context.Background(), k).Val())
		}
		return b.String()
	}
	before := dump()
	e.usage(`--label: label "Ref": the key may hold only`, "submit", "g", "--label", "Ref=1")
	e.usage(`--label: label "noequals": want key=value`, "submit", "g", "--label", "noequals")
	e.usage("labels: key ref given twice", "submit", "g", "--label", "ref=1", "--label", "ref=2")
	e.usage(`--param: parameter "Bad": the key may hold only`, "group", "set", "g", "--param", "Bad=1")
	e.usage("--label", "runs", "--label", "x")
	if after := dump(); after != before {
		t.Fatalf("a refused command wrote:\n%s\n---\n%s", before, after)
	}
}
