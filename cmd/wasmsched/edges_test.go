package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// The edges a new user hit on a clean clone (the defects of issue 53), each
// a case that failed before its fix.

// TestCLI_helpNamesAreData: a positional argument named "help" or "h" is a
// name like any other (a group, a schedule), not a help alias that prints
// help and exits 0 having done nothing; --help and -h still show help, and
// a command with subcommands still answers "help".
func TestCLI_helpNamesAreData(t *testing.T) {
	e := newCLIEnv(t)
	for _, name := range []string{"help", "h"} {
		t.Run(name, func(t *testing.T) {
			var r client.Run
			e.ok(&r, "submit", name, "--id", "r-"+name)
			if r.Group != name || r.State != "WAITING" {
				t.Fatalf("submit %s: %+v, want a run of group %s", name, r, name)
			}
			var g client.Group
			e.ok(&g, "group", "show", name)
			if g.Name != name || g.Waiting != 1 {
				t.Fatalf("group show %s: %+v", name, g)
			}
			e.ok(nil, "schedule", "set", name, "--group", "x", "--cron", "@hourly")
			var s client.Schedule
			e.ok(&s, "schedule", "show", name)
			if s.Name != name || s.Group != "x" {
				t.Fatalf("schedule show %s: %+v", name, s)
			}
			e.ok(nil, "group", "delete", name, "--force")
			e.usage("group "+name+" not found", "group", "show", name)
		})
	}
	for _, args := range [][]string{{"submit", "--help"}, {"submit", "-h"}, {"group", "help"}, {"group", "show", "--help"}} {
		code, out, errs := e.cli(args...)
		if code != 0 || !strings.Contains(out, "USAGE") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the help", args, code, out, errs)
		}
	}
}

// TestCLI_flagErrorsNameFlagsAsTyped: a flag error names a long flag with
// the two dashes users type.
func TestCLI_flagErrorsNameFlagsAsTyped(t *testing.T) {
	e := newCLIEnv(t)
	e.usage("flag provided but not defined: --nosuchflag (see wasmsched submit --help)", "submit", "g", "--nosuchflag")
	e.usage(`invalid value "x" for flag --slots`, "submit", "g", "--slots", "x")
	e.usage("flag provided but not defined: -q", "submit", "g", "-q")
}

// TestGroupStop_unknownGroup: stopping the active runs of a group that does
// not exist is exit 2 naming it, as discard, pause, resume and drain are.
func TestGroupStop_unknownGroup(t *testing.T) {
	e := newCLIEnv(t)
	e.usage("group nosuch does not exist", "group", "stop", "nosuch")
	e.ok(nil, "group", "set", "g")
	if out := e.okText("group", "stop", "g"); !strings.Contains(out, "group g: 0 active run(s) asked to stop") {
		t.Fatalf("group stop of an idle group: %q", out)
	}
}

// TestPolicy_builtinIsAVersion: pushing under a built-in's name is refused
// without --force (nothing written) and names the alternative; with --force
// it warns; the built-in is version 0, reached by a rollback past the first
// push or by activate builtin/0, and left again by a rollback. A policy ever
// activated can be made inactive (activate 0) and then deleted.
func TestPolicy_builtinIsAVersion(t *testing.T) {
	e := newCLIEnv(t)
	mine := builtinFile(t, "discard") // any serial plugin other than wait's bytes
	before := dumpNamespace(t, e)
	e.usage("push wait refused, nothing written: wait is a built-in policy", "policy", "push", "wait", mine)
	e.usage("policy push my-wait", "policy", "push", "wait", mine)
	sameDump(t, before, dumpNamespace(t, e))
	code, _, errs := e.cli("policy", "push", "wait", mine, "--force")
	if code != 0 || !strings.Contains(errs, "warning: it replaces the built-in wait for every group of namespace clitest") {
		t.Fatalf("push --force: exit %d, stderr %q", code, errs)
	}
	var a activeJSON
	e.ok(&a, "policy", "rollback", "wait")
	if a.Active != 0 || !strings.Contains(a.Message, "the built-in is active") {
		t.Fatalf("rollback past the first push: %+v", a)
	}
	e.usage("no earlier active version", "policy", "rollback", "wait")
	e.ok(&a, "policy", "activate", "wait", "1")
	for _, v := range []string{"builtin", "0", "none"} {
		e.ok(&a, "policy", "activate", "wait", v)
		if a.Active != 0 {
			t.Fatalf("activate wait %s: %+v", v, a)
		}
		e.ok(&a, "policy", "rollback", "wait")
		if a.Active != 1 {
			t.Fatalf("rollback from the built-in: %+v", a)
		}
	}
	e.usage("no version 2 (versions 1..1, or 0: none, the built-in)", "policy", "activate", "wait", "2")

	// a policy of its own: activated, made inactive, deleted
	e.ok(nil, "policy", "push", "mine", mine)
	e.usage("has active version 1", "policy", "delete", "mine")
	e.ok(&a, "policy", "activate", "mine", "0")
	if a.Active != 0 || !strings.Contains(a.Message, "no version is active") {
		t.Fatalf("activate mine 0: %+v", a)
	}
	e.ok(nil, "policy", "delete", "mine")
	e.usage("policy mine not found", "policy", "list", "mine")
}

// TestSlots_draining: a draining worker's free slots are not counted free
// (no run is placed there): slots shows the worker as draining and them
// apart; the allocation view the leader and the UI read agrees.
func TestSlots_draining(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	for _, w := range []string{"w1:1#1#aa", "w2:1#1#bb"} {
		if err := e.st.RegisterWorker(ctx, w, 3, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.st.DrainWorker(ctx, "w2:1#1#bb"); err != nil {
		t.Fatal(err)
	}
	var v client.Slots
	e.ok(&v, "slots")
	if v.Free != 3 || v.Draining != 3 || v.Assigned != 0 || len(v.Workers) != 2 || v.Workers[0].Draining || !v.Workers[1].Draining {
		t.Fatalf("slots: free %d, draining %d, workers %+v; want 3 free, 3 draining, w2 draining", v.Free, v.Draining, v.Workers)
	}
	table := e.okText("slots")
	if !strings.Contains(table, "free: 3  assigned: 0  draining: 3") || !strings.Contains(table, "DRAINING") {
		t.Fatalf("slots table:\n%s", table)
	}
	a, err := e.st.AllocationState(ctx, 1, false)
	if err != nil || a.Free != 3 || a.Slots != 6 {
		t.Fatalf("allocation view: free %d of %d (%v), want 3 of 6", a.Free, a.Slots, err)
	}
}

// TestRuns_watchGroupNotMadeYet: runs --group G --watch for a group not
// made yet waits for its first run (it was refused, exit 2).
func TestRuns_watchGroupNotMadeYet(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	e.ok(nil, "submit", "other")
	var out, errb syncBuffer
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resetCommandFlags()
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, []string{"wasmsched", "runs", "--group", "later", "--watch", "-o", "json", "--redis", e.url, "--namespace", e.ns}, &out, &errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), "group later does not exist") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning; stderr %q", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// (the warning comes before the subscription: submit until the watch
	// prints the run)
	for i := 0; !strings.Contains(out.String(), `"later"`); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the first run of the group was not printed: %q (stderr %q)", out.String(), errb.String())
		}
		if i%25 == 0 {
			if _, err := e.st.Submit(ctx, storage.SubmitRequest{Group: "later"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("watch exit %d (stderr %q)", code, errb.String())
	}
}

// TestCLI_smallEdges: the small defects a new user met, each as it reads
// now.
func TestCLI_smallEdges(t *testing.T) {
	e := newCLIEnv(t)
	// --in 0s is now (the default), not refused
	var r client.Run
	e.ok(&r, "submit", "g", "--in", "0s")
	if r.NotBefore != nil {
		t.Fatalf("submit --in 0s: not_before %v, want none", r.NotBefore)
	}
	e.usage("--in must be in [0, ", "submit", "g", "--in", "-1s")
	// an error never names a run id that was never created
	code, _, errs := e.cli("submit", "g", "--payload", strings.Repeat("x", limits.MaxPayload+1))
	if code != 2 || !strings.Contains(errs, "the run: payload is") || strings.Contains(errs, "r-") {
		t.Fatalf("oversized payload: exit %d, stderr %q", code, errs)
	}
	e.usage("run named: payload is", "submit", "g", "--id", "named", "--payload", strings.Repeat("x", limits.MaxPayload+1))
	// --who says what it records
	for cmd, want := range map[string]string{"discard": "recorded as who discarded them", "stop": "recorded as who stopped them", "pause": "recorded as who paused it"} {
		if out := e.okText("group", cmd, "--help"); !strings.Contains(out, want) {
			t.Errorf("group %s --help lacks %q", cmd, want)
		}
	}
	// the fair label is fair's: other policies do not print it
	e.ok(nil, "namespace", "set", "--allocate", "fair", "--fair-label", "tenant")
	if out := e.okText("namespace", "set", "--allocate", "priority"); strings.Contains(out, "across label") || !strings.Contains(out, "priority-first") {
		t.Fatalf("namespace set --allocate priority: %q", out)
	}
	// a busy group's delete names the command that empties it
	e.submitLaunched(e.lead(), "busy", "b1")
	e.usage("drain it first (wasmsched group drain busy --stop)", "group", "delete", "busy")
}

// TestDev_portTaken: dev on a port another process holds is a runtime
// failure (exit 1) that says the address is taken, not bad usage (exit 2).
func TestDev_portTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errs := runCLI(t, "dev", "--addr", ln.Addr().String(), "--api-addr", "", "--admin-addr", "")
	if code != 1 || !strings.Contains(errs, "the address is taken") {
		t.Fatalf("dev on a taken port: exit %d, stderr %q; want exit 1 saying the address is taken", code, errs)
	}
	code, _, errs = runCLI(t, "dev", "--addr", "127.0.0.1:notaport", "--api-addr", "", "--admin-addr", "")
	if code != 2 {
		t.Fatalf("dev on a malformed address: exit %d, stderr %q; want 2", code, errs)
	}
}

// TestGroupSet_paramsChecked: a policy declares the parameters it reads
// (abi/params; the catalog's debounce: period and max_wait, durations); a
// group's parameters are checked against it at group set (a value of
// another type, out of bounds or not declared is exit 2 naming it, nothing
// written), at a push that activates and at an activation (a group whose
// parameters the new version does not accept refuses it). A policy that
// declares nothing accepts any.
func TestGroupSet_paramsChecked(t *testing.T) {
	e := newCLIEnv(t)
	debounce := "../../examples/debounce/debounce.wasm"
	e.ok(nil, "policy", "push", "debounce", debounce)
	before := dumpNamespace(t, e)
	for _, c := range []struct{ param, want string }{
		{"period=notaduration", `parameter period: "notaduration" is not a duration`},
		{"period=500h", "parameter period: 500h is above the maximum 168h"},
		{"perod=2s", "parameter perod is not one the policy declares (period, max_wait)"},
	} {
		e.usage(c.want, "group", "set", "p", "--policy", "debounce", "--param", c.param)
	}
	sameDump(t, before, dumpNamespace(t, e))
	var g client.Group
	e.ok(&g, "group", "set", "p", "--policy", "debounce", "--param", "period=2s", "--param", "max_wait=30s")
	if g.Params["period"] != "2s" {
		t.Fatalf("group p: %+v", g)
	}
	e.usage("parameter max_wait: \"soon\" is not a duration", "group", "set", "p", "--param", "max_wait=soon")

	// a policy of its own: v1 declares nothing (any parameter), v2 (the
	// catalog's throttle) declares limit and period: a group with another
	// parameter refuses v2 becoming active
	e.ok(nil, "policy", "push", "mine", builtinFile(t, "wait"))
	e.ok(nil, "group", "set", "q", "--policy", "mine", "--param", "color=blue")
	throttle := "../../examples/throttle/throttle.wasm"
	e.usage("push mine refused, nothing written: group q (policy mine): parameter color is not one the policy declares (limit, period)",
		"policy", "push", "mine", throttle)
	e.ok(nil, "policy", "push", "mine", throttle, "--no-activate")
	e.usage("activate mine 2 refused, nothing written: group q (policy mine): parameter color", "policy", "activate", "mine", "2")
	e.ok(nil, "group", "set", "q", "--replace-params", "--param", "limit=5")
	e.ok(nil, "policy", "activate", "mine", "2")
	e.usage("parameter limit: 0 is below the minimum 1", "group", "set", "q", "--param", "limit=0")
}

// TestScheduleSet_badValues: each bad value is refused with exit 2 and a
// message naming it (storage checks the values, once), and nothing is
// written.
func TestScheduleSet_badValues(t *testing.T) {
	e := newCLIEnv(t)
	big := strings.Repeat("x", 64<<10+1)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`group name "a{b}"`, []string{"--group", "a{b}", "--cron", "@hourly"}},
		{`cron "*/5 * *"`, []string{"--group", "g", "--cron", "*/5 * *"}},
		{`tz "Mars/Olympus"`, []string{"--group", "g", "--cron", "@hourly", "--tz", "Mars/Olympus"}},
		{"payload is 65537 bytes, at most 65536", []string{"--group", "g", "--cron", "@hourly", "--payload", big}},
		{"priority 4294967296 outside the 32-bit range", []string{"--group", "g", "--cron", "@hourly", "--priority", "4294967296"}},
		{"--group is required", []string{"--cron", "@hourly"}},
		{"--slots must be >= 1, got 0", []string{"--group", "g", "--cron", "@hourly", "--slots", "0"}},
	} {
		e.usage(tc.want, append([]string{"schedule", "set", "nightly"}, tc.args...)...)
	}
	var out []client.Schedule
	e.ok(&out, "schedule", "list")
	if len(out) != 0 {
		t.Errorf("bad input wrote schedules: %+v", out)
	}
}

// TestRunTimeFlags_badValues: a zero where zero means "not given" is the
// CLI's to refuse; an out-of-range value is storage's (checked once, for
// submit, schedule set and group set alike). Each is exit 2 naming the
// value, and nothing is written.
func TestRunTimeFlags_badValues(t *testing.T) {
	e := newCLIEnv(t)
	e.ok(nil, "group", "set", "g")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--timeout 0: leave the flag out", []string{"--timeout", "0s"}},
		{"timeout -1s outside 1ms..720h0m0s", []string{"--timeout", "-1s"}},
		{"timeout 721h0m0s outside 1ms..720h0m0s", []string{"--timeout", "721h"}},
		{"--max-attempts 0: want at least 1", []string{"--max-attempts", "0"}},
		{"max attempts 101 outside 1..100", []string{"--max-attempts", "101"}},
		{"retry backoff 10m0s is above its cap 1m0s", []string{"--max-attempts", "3", "--retry-backoff", "10m", "--retry-cap", "1m"}},
		{"retry backoff cap 1000h0m0s outside 1ms..168h0m0s", []string{"--max-attempts", "3", "--retry-cap", "1000h"}},
		{"need --max-attempts N", []string{"--retry-backoff", "1s"}},
	} {
		e.usage(tc.want, append([]string{"submit", "g"}, tc.args...)...)
		e.usage(tc.want, append([]string{"schedule", "set", "s", "--group", "g", "--cron", "@hourly"}, tc.args...)...)
		if tc.args[0] != "--timeout" {
			e.usage(tc.want, append([]string{"group", "set", "g"}, tc.args...)...)
		}
	}
	e.usage("group g: timeout -1s outside", "group", "set", "g", "--run-timeout", "-1s")
	var rs []client.Run
	e.ok(&rs, "runs")
	var scs []client.Schedule
	e.ok(&scs, "schedule", "list")
	var g client.Group
	e.ok(&g, "group", "show", "g")
	if len(rs) != 0 || len(scs) != 0 || g.Version != 1 || g.MaxAttempts != 0 || g.RunTimeoutMS != 0 {
		t.Errorf("bad input wrote: %d runs, %d schedules, group %+v", len(rs), len(scs), g)
	}
}

// TestGroupSet_require: --require sets a group's requirements (group show
// and -o json carry them), --no-require drops them, bad ones exit 2 with
// nothing written; the same for --prefer (and submit --prefer);
// worker --label/--groups are checked before anything connects.
func TestGroupSet_require(t *testing.T) {
	e := newCLIEnv(t)
	var g client.Group
	e.ok(&g, "group", "set", "train", "--require", "gpu=a100", "--require", "zone=eu")
	if fmt.Sprint(g.Require) != "map[gpu:a100 zone:eu]" {
		t.Fatalf("require %v", g.Require)
	}
	if _, out, _ := e.cli("group", "show", "train"); !strings.Contains(out, "REQUIRE") || !strings.Contains(out, "gpu=a100,zone=eu") {
		t.Errorf("group show does not list the requirements:\n%s", out)
	}
	e.usage(`--require: label "GPU": the key may hold only`, "group", "set", "train", "--require", "GPU=x")
	e.usage("--require and --no-require are exclusive", "group", "set", "train", "--require", "gpu=x", "--no-require")
	e.ok(&g, "group", "show", "train")
	if fmt.Sprint(g.Require) != "map[gpu:a100 zone:eu]" || g.Version != 1 {
		t.Fatalf("a bad --require changed the group: %+v", g)
	}
	var cleared client.Group // (a fresh record: an absent field leaves a reused one as it was)
	e.ok(&cleared, "group", "set", "train", "--no-require")
	if cleared.Require != nil {
		t.Fatalf("require after --no-require: %v", cleared.Require)
	}
	// same worker: on the group (set, shown, cleared, kept by other changes) and on a run
	e.ok(&g, "group", "set", "train", "--same-worker")
	if !g.SameWorker {
		t.Fatalf("group set --same-worker: %+v", g)
	}
	e.ok(&g, "group", "set", "train", "--max-active", "3")
	if !g.SameWorker {
		t.Fatal("a change of max-active dropped same-worker")
	}
	if _, out, _ := e.cli("group", "show", "train"); !strings.Contains(out, "SAME WORKER") {
		t.Errorf("group show does not say same worker:\n%s", out)
	}
	var run client.Run
	e.ok(&run, "submit", "plain", "--slots", "2", "--same-worker", "--id", "sw")
	if !run.SameWorker || run.Require != nil {
		t.Fatalf("submit --same-worker: same %v, require %v", run.SameWorker, run.Require)
	}
	if _, out, _ := e.cli("run", "show", "sw"); !strings.Contains(out, "SAME WORKER") {
		t.Errorf("run show does not say same worker:\n%s", out)
	}
	var off client.Group
	e.ok(&off, "group", "set", "train", "--same-worker=false")
	if off.SameWorker {
		t.Fatal("--same-worker=false left it on")
	}
	// preferences: on the group (set, shown, kept by other changes,
	// cleared) and on a run; bad ones exit 2 with nothing written
	e.ok(&g, "group", "set", "train", "--prefer", "region=eu:10", "--prefer", "disk=ssd")
	if fmt.Sprint(g.Prefer) != "[disk=ssd:1 region=eu:10]" {
		t.Fatalf("group set --prefer: %v", g.Prefer)
	}
	e.ok(&g, "group", "set", "train", "--max-active", "4")
	if len(g.Prefer) != 2 {
		t.Fatalf("a change of max-active dropped the preferences: %v", g.Prefer)
	}
	if _, out, _ := e.cli("group", "show", "train"); !strings.Contains(out, "PREFER") || !strings.Contains(out, "disk=ssd:1, region=eu:10") {
		t.Errorf("group show does not list the preferences:\n%s", out)
	}
	version := g.Version
	e.usage("--prefer: preference \"region=eu:0\": the weight must be an integer 1..1000", "group", "set", "train", "--prefer", "region=eu:0")
	e.usage("--prefer and --no-prefer are exclusive", "group", "set", "train", "--prefer", "a=b", "--no-prefer")
	e.usage(`--prefer: preference "noeq": want key=value[:weight]`, "submit", "train", "--prefer", "noeq")
	e.usage("preferences: key region given twice", "submit", "train", "--prefer", "region=eu", "--prefer", "region=us")
	e.ok(&g, "group", "show", "train")
	if g.Version != version || g.Waiting != 0 {
		t.Fatalf("bad --prefer wrote: version %d (was %d), %d waiting", g.Version, version, g.Waiting)
	}
	e.ok(&run, "submit", "plain", "--prefer", "region=us:20", "--id", "pr")
	if fmt.Sprint(run.Prefer) != "[region=us:20]" || run.Require != nil {
		t.Fatalf("submit --prefer: prefer %v, require %v", run.Prefer, run.Require)
	}
	if _, out, _ := e.cli("run", "show", "pr"); !strings.Contains(out, "PREFER") || !strings.Contains(out, "region=us:20") {
		t.Errorf("run show does not list the preferences:\n%s", out)
	}
	var unpref client.Group
	e.ok(&unpref, "group", "set", "train", "--no-prefer")
	if unpref.Prefer != nil {
		t.Fatalf("prefer after --no-prefer: %v", unpref.Prefer)
	}
	e.usage(`--label: label "noeq": want key=value`, "worker", "--advertise", "w:1", "--simulate", "--label", "noeq")
	e.usage(`--groups: group name "a b" contains whitespace`, "worker", "--advertise", "w:1", "--simulate", "--groups", "a b")
}

// TestRunExplain_placement: a LAUNCHED run of a group with requirements
// is explained by them: no live worker carries them (and how many that do
// are draining), or how many do and how many of their slots are free.
func TestRunExplain_placement(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	e.ok(nil, "group", "set", "train", "--require", "gpu=a100")
	f := e.lead()
	e.submitLaunched(f, "train", "r1") // no worker at all: it queues LAUNCHED
	if err := e.st.RegisterWorker(ctx, "cpu", 2, time.Hour); err != nil {
		t.Fatal(err)
	}
	var ex client.Explanation
	e.ok(&ex, "run", "explain", "r1")
	if ex.Run.State != "LAUNCHED" || !strings.Contains(ex.Why, "it requires gpu=a100 (group set --require, submit --require), and none of the 1 live workers that serve group train carries it") {
		t.Fatalf("explain with no GPU worker: %+v", ex.Why)
	}
	if err := e.st.RegisterWorkerWith(ctx, "gpu", 1, time.Hour, storage.WorkerPlacement{Labels: []abi.Label{{Key: "gpu", Value: "a100"}}}); err != nil {
		t.Fatal(err)
	}
	e.ok(&ex, "run", "explain", "r1")
	if !strings.Contains(ex.Why, "1 live worker(s) have them, 1 of their slots free") {
		t.Fatalf("explain with a GPU worker: %+v", ex.Why)
	}
	// a run's own requirements add to its group's
	var r2 client.Run
	e.ok(&r2, "submit", "train", "--id", "r2", "--require", "zone=eu")
	if r2.Require["zone"] != "eu" {
		t.Fatalf("submit --require: the record says %v", r2.Require)
	}
	e.usage(`--require: label "Zone": the key may hold only`, "submit", "train", "--id", "r3", "--require", "Zone=eu")
	sn, err := e.st.Snapshot(ctx, "train")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, f, "train", storage.Decision{Version: sn.Group.Version, ClaimID: "c-r2",
		Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r2"}}}); err != nil {
		t.Fatal(err)
	}
	e.ok(&ex, "run", "explain", "r2")
	if !strings.Contains(ex.Why, "it requires gpu=a100, zone=eu") || !strings.Contains(ex.Why, "none of the 2 live workers") {
		t.Fatalf("explain of a run with its own requirements: %+v", ex.Why)
	}
	// a run of 3 slots on one worker, where no worker has 3 free
	e.ok(nil, "submit", "plain", "--id", "s1", "--slots", "3", "--same-worker")
	sn, err = e.st.Snapshot(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storagetest.Apply(ctx, e.st, f, "plain", storage.Decision{Version: sn.Group.Version, ClaimID: "c-s1",
		Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "s1"}}}); err != nil {
		t.Fatal(err)
	}
	e.ok(&ex, "run", "explain", "s1")
	if ex.Run.State != "LAUNCHED" || !strings.Contains(ex.Why, "waiting for one worker with 3 free slots") || !strings.Contains(ex.Why, "the freest of the 2 live workers that may take it has 2 free") {
		t.Fatalf("explain of a same-worker run: %s %+v", ex.Run.State, ex.Why)
	}
}
