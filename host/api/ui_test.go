package api_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/storage"
)

// chromium finds Debian's chromium. Without it the browser test is
// skipped, unless WASMSCHED_REQUIRE_BROWSER is set (scripts/test sets it
// after installing chromium: in CI a missing browser fails).
func chromium(t *testing.T) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("WASMSCHED_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium on PATH (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH")
	return ""
}

// TestUI_browser drives the web UI in headless chromium against a real
// redis-server, a leader and a simulated worker: it signs in with an admin
// token, watches a submitted run go WAITING -> RUNNING -> SUCCEEDED in the
// runs table without a page reload (server-sent events), opens the run's
// group and its explanation, and rolls a policy back.
//
// WASMSCHED_UI_SCREENSHOTS=DIR writes screenshots of the main pages there
// (docs/ui holds the committed ones):
//
//	WASMSCHED_UI_SCREENSHOTS=$PWD/docs/ui go test ./host/api -run TestUI_browser
func TestUI_browser(t *testing.T) {
	if raceEnabled {
		t.Skip("the browser test runs in the plain pass (see race_test.go)")
	}
	exe := chromium(t)
	e := newEnv(t, opts{tokens: true, engine: true})
	bg := context.Background()
	pushTwoVersions(t, e.st) // v2 active
	if got := e.do("PUT", ns+"/groups/nightly", `{"policy": "wait", "max_active": 1}`, nil); got != 200 {
		t.Fatalf("group: %d", got)
	}
	e.do("PUT", ns+"/groups/latest", `{"policy": "priority", "max_active": 1}`, nil)
	if got := e.do("PUT", ns+"/allocation", `{"policy": "fair", "fair_label": "tenant", "weights": {"acme": 2}}`, nil); got != 200 {
		t.Fatalf("allocation: %d", got)
	}
	e.do("POST", ns+"/groups/latest/runs", `{"id": "latest-1", "duration_ms": 3600000, "labels": {"tenant": "acme"}}`, nil) // busy for the whole test
	e.do("POST", ns+"/groups/latest/runs", `{"id": "latest-2", "priority": 5}`, nil)

	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("headless", true), chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(bg, allocOpts...)
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()
	var dialogs []string // a native dialog blocks the page: say which
	var dmu sync.Mutex
	if err := chromedp.Listen(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dmu.Lock()
			dialogs = append(dialogs, string(d.Type)+": "+d.Message)
			dmu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	dump := func() string {
		dmu.Lock()
		if len(dialogs) > 0 {
			t.Logf("dialogs opened: %q", dialogs)
		}
		dmu.Unlock()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second) // the test's ctx may be over
		defer cancel()
		html, _ := chromedp.Run(dctx, chromedp.OuterHTML(chromedp.CSS("main")))
		return html
	}
	run := func(what string, acts ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, acts...); err != nil {
			t.Fatalf("%s: %v\n(main: %.2000s)", what, err, dump())
		}
	}
	text := func(sel string) string {
		t.Helper()
		// read in one step of the page's own JS: a repaint (run events
		// repaint the page every 250 ms at most) cannot replace the node
		// between finding it and reading it, as it could between
		// chromedp's query and its read (which then read "" or failed)
		js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return el ? el.innerText : null; })()`, sel)
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
			if err == nil && s != nil {
				return *s
			}
			if time.Now().After(deadline) {
				t.Fatalf("text of %s: %v (no such element)\n(main: %.2000s)", sel, err, dump())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// act runs js, an expression that acts and returns true (false: not
	// yet, e.g. its element is not there), in one step of the page's own
	// JS, until it acts: a repaint (run events repaint a page every 250 ms
	// at most) cannot replace a node between finding it and using it, as
	// it could between chromedp's query and its click ("Could not find
	// node with given id", a clean-clone failure of this test)
	act := func(what, js string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v (not done in 10 s)\n(main: %.2000s)", what, err, dump())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	click := func(sel string) {
		t.Helper()
		act("click "+sel, fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, sel))
	}
	shots := os.Getenv("WASMSCHED_UI_SCREENSHOTS")
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		run("settle", chromedp.Sleep(300*time.Millisecond))
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// sign in: the UI asks for a token once and keeps it in a cookie
	run("sign in", chromedp.Navigate(e.srv.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), adminTok),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#leader-identity")))
	who := text("#who")
	if !strings.Contains(who, "admin") {
		t.Fatalf("signed in as %q", who)
	}
	run("a sign-out button", chromedp.WaitVisible(chromedp.CSS("#logout")))
	run("charts", chromedp.WaitVisible(chromedp.CSS("#ov-charts figure.chart")))
	// slots in use per value of the fair label (latest-1 holds one, weight 2)
	run("slots by tenant", chromedp.Navigate(e.srv.URL+"/ui/#/groups"), chromedp.Navigate(e.srv.URL+"/ui/#/"),
		chromedp.WaitVisible(chromedp.CSS(`main[data-view="overview"]`)))
	for i := 0; ; i++ {
		got := strings.ToLower(strings.Join(strings.Fields(text("#ov-allocation")), " "))
		if strings.Contains(got, "acme 1") && strings.Contains(got, "tenant slots share runs weight") && strings.HasSuffix(got, "1 2") {
			break
		}
		if i == 50 {
			t.Fatalf("overview slots by tenant: %q", got)
		}
		time.Sleep(100 * time.Millisecond)
		run("reload", chromedp.Reload())
	}
	shot("overview")

	// the runs page, marked so a reload would be seen
	run("runs page", chromedp.Navigate(e.srv.URL+"/ui/#/runs?group=nightly"),
		chromedp.WaitVisible(chromedp.CSS(`main[data-view="runs"]`)),
		chromedp.Action[chromedp.Void](func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Evaluate[string](`window.__noReload = "still here"`)(ctx, tg)
			return chromedp.Void{}, err
		}),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)))
	// Each state waited for lasts until the test moves on, or 8 s: the
	// server relays a run event after re-reading the run, so on a loaded
	// machine a state shorter than that lag is never shown (a clean-clone
	// failure: a 2.5 s blocker was SUCCEEDED before its RUNNING was relayed)
	e.do("POST", ns+"/groups/nightly/runs", `{"id": "blocker", "duration_ms": 3600000}`, nil) // until it is stopped
	run("blocker running", chromedp.WaitVisible(chromedp.CSS(`tr[data-run="blocker"] [data-state="RUNNING"]`)))
	e.do("POST", ns+"/groups/nightly/runs", `{"id": "target", "duration_ms": 8000}`, nil)
	run("target waiting", chromedp.WaitVisible(chromedp.CSS(`tr[data-run="target"] [data-state="WAITING"]`)))
	shot("runs")
	if got := e.do("POST", ns+"/runs/blocker/stop", `{"reason": "the UI test moves on"}`, nil); got != 200 {
		t.Fatalf("stop blocker: %d", got)
	}
	run("target running", chromedp.WaitVisible(chromedp.CSS(`tr[data-run="target"] [data-state="RUNNING"]`)))
	run("target succeeded", chromedp.WaitVisible(chromedp.CSS(`tr[data-run="target"] [data-state="SUCCEEDED"]`)))
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__noReload || ""`))
	if err != nil {
		t.Fatal(err)
	}
	if marker != "still here" {
		t.Fatal("the page reloaded while the run changed state")
	}

	// after that burst the charts have points (the leader's series, one a
	// 200 ms here), on the overview and on the group's page
	deadline := time.Now().Add(20 * time.Second)
	for {
		run("overview charts", chromedp.Navigate(e.srv.URL+"/ui/#/groups"), chromedp.Navigate(e.srv.URL+"/ui/#/"),
			chromedp.WaitVisible(chromedp.CSS("#ov-charts figure.chart")))
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Math.min(...[...document.querySelectorAll("#ov-charts figure")].map(f => +f.dataset.points))`))
		if err == nil && n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overview's charts have %d points after a burst (%v)", n, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	run("group charts", chromedp.Navigate(e.srv.URL+"/ui/#/groups/nightly"), chromedp.WaitVisible(chromedp.CSS("#group-charts figure.chart")))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`+document.querySelector("#group-charts figure").dataset.points`)); err != nil || n == 0 {
		t.Fatalf("the group's chart has %d points (%v)", n, err)
	}
	shot("charts")

	// labels: a filter of the runs page, shown on a run; parameters on the group
	e.do("POST", ns+"/groups/nightly/runs", `{"id": "labelled", "labels": {"ref": "main", "tenant": "acme"}}`, nil)
	if got := e.do("PUT", ns+"/groups/nightly", `{"params": {"period": "2s"}}`, nil); got != 200 {
		t.Fatalf("group params: %d", got)
	}
	run("runs by label", chromedp.Navigate(e.srv.URL+"/ui/#/runs?label=ref%3Dmain"),
		chromedp.WaitVisible(chromedp.CSS(`#runs-body tr[data-run="labelled"]`)))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#runs-body tr[data-run="target"]').length`)); err != nil || n != 0 {
		t.Fatalf("the label filter lists a run without the label (%d, %v)", n, err)
	}
	run("a run's labels", chromedp.Navigate(e.srv.URL+"/ui/#/runs/labelled"), chromedp.WaitVisible(chromedp.CSS("#run-labels")))
	if got := text("#run-labels"); !strings.Contains(got, "ref=main") || !strings.Contains(got, "tenant=acme") {
		t.Fatalf("run labels %q", got)
	}
	// (a group with no active run, no queue and no decision: its page renders)
	run("a group's params", chromedp.Navigate(e.srv.URL+"/ui/#/groups/nightly"), chromedp.WaitVisible(chromedp.CSS("#group-params")))
	if got := text("#group-params"); !strings.Contains(got, "period=2s") {
		t.Fatalf("group params %q", got)
	}
	if got := e.do("PUT", ns+"/groups/placed", `{"require": {"zone": "eu"}, "same_worker": true, "prefer": ["disk=ssd:3"]}`, nil); got != 200 {
		t.Fatalf("group require: %d", got)
	}
	run("a group's requirements", chromedp.Navigate(e.srv.URL+"/ui/#/groups/placed"), chromedp.WaitVisible(chromedp.CSS("#group-require")))
	if got := text("#group-require"); !strings.Contains(got, "zone=eu") {
		t.Fatalf("group requirements %q", got)
	}
	if got := text("#group-same-worker"); !strings.Contains(got, "one worker") {
		t.Fatalf("group same worker %q", got)
	}
	if got := text("#group-prefer"); !strings.Contains(got, "disk=ssd:3") {
		t.Fatalf("group preferences %q", got)
	}
	// a run's own requirements and same-worker flag, on its page
	if got := e.do("POST", ns+"/groups/placed/runs", `{"id": "placed-1", "slots": 2, "require": {"gpu": "a100"}, "same_worker": true, "prefer": ["region=eu:7"]}`, nil); got != 201 {
		t.Fatalf("submit placed-1: %d", got)
	}
	run("a run's placement", chromedp.Navigate(e.srv.URL+"/ui/#/runs/placed-1"), chromedp.WaitVisible(chromedp.CSS("#run-placement")))
	if got := text("#run-placement"); !strings.Contains(got, "gpu=a100") || !strings.Contains(got, "one worker") || !strings.Contains(got, "prefers region=eu:7") {
		t.Fatalf("run placement %q", got)
	}
	// a worker's labels and groups, on the overview
	if err := e.st.RegisterWorkerWith(bg, "gpu-box", 1, time.Hour, storage.WorkerPlacement{
		Labels: []abi.Label{{Key: "gpu", Value: "a100"}}, Groups: []string{"placed"}}); err != nil {
		t.Fatal(err)
	}
	run("a worker's labels", chromedp.Navigate(e.srv.URL+"/ui/#/"), chromedp.WaitVisible(chromedp.CSS("#ov-charts")))
	if got := text("body"); !strings.Contains(got, "gpu=a100") || !strings.Contains(got, "serves placed") {
		t.Fatalf("the overview does not show gpu-box's labels and groups:\n%s", got)
	}

	// its group and its explanation
	run("group page", chromedp.Navigate(e.srv.URL+"/ui/#/groups/latest"),
		chromedp.WaitVisible(chromedp.CSS(`#group-active tr[data-run="latest-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#group-queue tr[data-run="latest-2"]`)))
	// the allocation section comes from its own request (/allocation?group=):
	// it may render after the run tables
	for i := 0; ; i++ {
		got := strings.Join(strings.Fields(text("#group-allocation")), " ")
		if strings.Contains(got, "acme 1") {
			break
		}
		if i == 50 {
			t.Fatalf("group slots by tenant: %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// the choice is made in one step of the page's JS: chromedp.SetValue
	// finds the node, then sets it, and a repaint in between (a run event)
	// set a detached copy (a clean-clone failure: the dry-run ran the
	// group's own policy)
	run("dry-run form", chromedp.WaitVisible(chromedp.CSS("#dryrun-policy")))
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#dryrun-policy").value = "wait"`)); err != nil || got != "wait" {
		t.Fatalf("choosing the dry-run policy: %q (%v)", got, err)
	}
	click(`#dryrun-form button`)
	run("dry-run", chromedp.WaitVisible(chromedp.CSS(`#dryrun-result table`)))
	// a run event repaints the page (the new run in the queue): the dry-run's
	// result and the chosen policy stay
	e.do("POST", ns+"/groups/latest/runs", `{"id": "latest-3"}`, nil)
	run("repainted", chromedp.WaitVisible(chromedp.CSS(`#group-queue tr[data-run="latest-3"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#dryrun-result table`)))
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#dryrun-policy").value`)); err != nil || got != "wait" {
		t.Fatalf("after a repaint the dry-run policy is %q (%v)", got, err)
	}
	run("timeline", chromedp.WaitReady(chromedp.CSS(`#group-timeline svg rect`))) // SVG: ready, not "visible" to chromedp
	if opts := text("#dryrun-policy"); strings.Contains(opts, "reuse") {
		t.Fatalf("the dry-run menu offers a slot-reuse policy: %q", opts)
	}
	click(`button[data-group-action="pause"]`)
	run("pause", chromedp.WaitVisible(chromedp.CSS(`button[data-group-action="resume"]`)))
	if g, err := e.st.GetGroup(bg, "latest"); err != nil || !g.Paused || !strings.Contains(text("#group-paused"), "paused since") {
		t.Fatalf("after the UI's pause: %+v %v", g.Paused, err)
	}
	click(`button[data-group-action="resume"]`)
	run("resume", chromedp.WaitVisible(chromedp.CSS(`button[data-group-action="pause"]`)))
	shot("group")
	click(`a[data-explain="latest-2"]`)
	run("explain", chromedp.WaitVisible(chromedp.CSS("#explain-why")))
	why := text("#explain-why")
	if !strings.Contains(why, "active runs of max_active 1") {
		t.Fatalf("explain says %q", why)
	}
	shot("explain")
	run("run page", chromedp.Navigate(e.srv.URL+"/ui/#/runs/target"), chromedp.WaitVisible(chromedp.CSS("#run-decision")))
	if p := text("#run-payload"); p == "" {
		t.Fatal("the run page shows no payload row")
	}
	shot("run")

	// runs in time: a delayed run with retries; a schedule, paused from the UI
	if got := e.do("POST", ns+"/groups/later/runs", `{"id": "later-1", "not_before": "`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`", "max_attempts": 3, "timeout_ms": 60000}`, nil); got != 201 {
		t.Fatalf("delayed submit: %d", got)
	}
	run("delayed run page", chromedp.Navigate(e.srv.URL+"/ui/#/runs/later-1"), chromedp.WaitVisible(chromedp.CSS("#run-not-before")))
	if nb, att := text("#run-not-before"), text("#run-attempt"); !strings.Contains(nb, "due in") || att != "1 of 3" {
		t.Fatalf("delayed run shows not_before %q, attempt %q", nb, att)
	}
	if st := text("#run-state"); !strings.Contains(st, "WAITING") || !strings.Contains(st, "delayed until") {
		t.Fatalf("delayed run's state %q, want WAITING marked delayed", st)
	}
	// a delayed run is marked in the runs list too, not a plain WAITING
	run("delayed in the list", chromedp.Navigate(e.srv.URL+"/ui/#/runs?group=later"), chromedp.WaitVisible(chromedp.CSS(`[data-delayed="later-1"]`)))
	if got := e.do("PUT", ns+"/schedules/hourly", `{"group": "nightly", "cron": "@hourly"}`, nil); got != 200 {
		t.Fatalf("put schedule: %d", got)
	}
	run("schedules page", chromedp.Navigate(e.srv.URL+"/ui/#/schedules"), chromedp.WaitVisible(chromedp.CSS(`tr[data-schedule="hourly"]`)))
	shot("schedules")
	click(`button[data-sched-action="pause"]`)
	run("pause", chromedp.WaitVisible(chromedp.CSS(`button[data-sched-action="resume"]`)))
	if sc, err := e.st.GetSchedule(bg, "hourly"); err != nil || !sc.Paused {
		t.Fatalf("after the UI's pause: %+v %v", sc, err)
	}

	// as admin, roll back a policy
	run("policies", chromedp.Navigate(e.srv.URL+"/ui/#/policies"),
		chromedp.WaitVisible(chromedp.CSS(`[data-policy-active="priority"]`)))
	active := text(`[data-policy-active="priority"]`)
	if active != "v2" {
		t.Fatalf("priority active %q before the rollback", active)
	}
	shot("policies")
	click(`button[data-rollback="priority"]`)
	run("rollback", chromedp.WaitVisible(chromedp.Search(`//span[@data-policy-active="priority"][text()="v1"]`)))
	p, err := e.st.GetPolicy(bg, "priority")
	if err != nil || p.Active != 1 {
		t.Fatalf("after the UI's rollback: %+v %v", p.Active, err)
	}

	// submit from the UI, then a bulk discard by label (dialogs answered yes)
	e.do("PUT", ns+"/groups/bulk", `{"policy": "wait"}`, nil)
	e.do("POST", ns+"/groups/bulk/pause", `{}`, nil)
	e.do("POST", ns+"/groups/bulk/runs", `{"id": "keep-me", "labels": {"ref": "other"}}`, nil)
	run("the bulk group", chromedp.Navigate(e.srv.URL+"/ui/#/groups/bulk"), chromedp.WaitVisible(chromedp.CSS("#submit-form")),
		// the queue's events re-render the page (debounced 250 ms): let it settle before typing
		chromedp.Sleep(600*time.Millisecond), chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")),
		chromedp.Action[chromedp.Void](func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Evaluate[bool](`window.confirm = () => true; window.alert = (m) => { window.__alert = m; }; true`)(ctx, tg)
			return chromedp.Void{}, err
		}),
	)
	// fill and submit the form in one step: a repaint between typing and
	// the click would submit an empty copy
	act("submit from the UI", `(() => { const f = document.querySelector("#submit-form"); if (!f) return false;
		f.querySelector('input[name="id"]').value = "ui-run"; f.querySelector('input[name="labels"]').value = "ref=ui tenant=x";
		f.querySelector('button[type="submit"]').click(); return true; })()`)
	run("the submit's result", chromedp.WaitVisible(chromedp.CSS(`#submit-result a`)))
	if r, err := e.st.GetRun(bg, "ui-run"); err != nil || r.Label("tenant") != "x" || r.State != storage.StateWaiting {
		t.Fatalf("the run the UI submitted: %+v %v", r, err)
	}
	run("settle", chromedp.Sleep(600*time.Millisecond), chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")))
	act("discard by label", `(() => { const l = document.querySelector("#bulk-label"), b = document.querySelector('button[data-group-action="discard"]');
		if (!l || !b) return false; l.value = "ref=ui"; b.click(); return true; })()`)
	alertText, err := chromedp.Run(ctx, chromedp.Poll[string](`window.__alert`))
	if err != nil || !strings.Contains(alertText, "1 run(s) discarded with label ref=ui") {
		t.Fatalf("the bulk discard said %q (%v)", alertText, err)
	}
	if r, _ := e.st.GetRun(bg, "ui-run"); r.State != storage.StateDiscarded {
		t.Fatalf("ui-run is %s after the discard by label", r.State)
	}
	if r, _ := e.st.GetRun(bg, "keep-me"); r.State != storage.StateWaiting {
		t.Fatalf("keep-me (another label) is %s", r.State)
	}
	run("drain", chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")))
	click("#group-drain")
	if msg, err := chromedp.Run(ctx, chromedp.Poll[string](`(window.__alert || "").includes("paused,") && window.__alert`)); err != nil ||
		!strings.Contains(msg, "1 waiting run(s) discarded") {
		t.Fatalf("the drain said %q (%v)", msg, err)
	}
	if r, _ := e.st.GetRun(bg, "keep-me"); r.State != storage.StateDiscarded {
		t.Fatalf("keep-me is %s after the drain", r.State)
	}

	// a paused group launches nothing while a run waits; resumed, it runs
	e.do("PUT", ns+"/groups/pr", `{"policy": "wait", "max_active": 1}`, nil)
	run("the pr group", chromedp.Navigate(e.srv.URL+"/ui/#/groups/pr"), chromedp.WaitVisible(chromedp.CSS(`button[data-group-action="pause"]`)),
		chromedp.Sleep(600*time.Millisecond), chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")))
	click(`button[data-group-action="pause"]`)
	run("paused pr", chromedp.WaitVisible(chromedp.CSS(`button[data-group-action="resume"]`)))
	if got := e.do("POST", ns+"/groups/pr/runs", `{"id": "pr-1", "duration_ms": 0}`, nil); got != 201 {
		t.Fatalf("submit to the paused group: %d", got)
	}
	time.Sleep(time.Second) // (a paused group never launches: any wait shows it)
	if r, _ := e.st.GetRun(bg, "pr-1"); r.State != storage.StateWaiting {
		t.Fatalf("a run of a paused group is %s", r.State)
	}
	run("resume pr", chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")))
	click(`button[data-group-action="resume"]`)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if r, _ := e.st.GetRun(bg, "pr-1"); r.State == storage.StateSucceeded {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the resume pr-1 is %s", r.State)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// a FAILED run retried from its page (the dialog answered yes): its
	// second attempt runs (and fails again: the simulated worker fails
	// "fail"); the group page links its failed runs and retries them
	if got := e.do("POST", ns+"/groups/pr/runs", `{"id": "fail-1", "payload": "fail"}`, nil); got != 201 {
		t.Fatalf("submit fail-1: %d", got)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, _ := e.st.GetRun(bg, "fail-1"); r.State == storage.StateFailed {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("fail-1 is %s, want FAILED", r.State)
		}
	}
	run("a failed run", chromedp.Navigate(e.srv.URL+"/ui/#/runs/fail-1"), chromedp.WaitVisible(chromedp.CSS("#run-retry")),
		chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")))
	act("retry from the run page", `(() => { window.confirm = () => true; const b = document.querySelector("#run-retry");
		if (!b) return false; b.click(); return true; })()`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, _ := e.st.GetRun(bg, "fail-1"); r.Attempt == 2 && r.State == storage.StateFailed {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the UI's retry fail-1 is %s attempt %d, want FAILED again on attempt 2", r.State, r.Attempt)
		}
	}
	run("the pr group's controls", chromedp.Navigate(e.srv.URL+"/ui/#/groups/pr"), chromedp.WaitVisible(chromedp.CSS("#group-retry")))
	if href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#group-failed").getAttribute("href")`)); err != nil ||
		!strings.Contains(href, "state=FAILED") || !strings.Contains(href, "group=pr") {
		t.Fatalf("the group's failed-runs link %q (%v)", href, err)
	}

	// at 1280x800 no element runs out of its card, chart or record
	run("viewport", chromedp.EmulateViewport(1280, 800))
	for _, page := range []string{"#/", "#/groups/nightly", "#/runs/labelled"} {
		run("layout "+page, chromedp.Navigate(e.srv.URL+"/ui/"+page), chromedp.Sleep(400*time.Millisecond),
			chromedp.WaitReady(chromedp.CSS("body:not([data-busy])")))
		over, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll(".card, .chart, dl.kv, .card *, .chart figcaption, dl.kv dd")]
			.filter((el) => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "auto")
			.map((el) => el.tagName + "." + el.className + " " + el.scrollWidth + ">" + el.clientWidth).join("; ")`))
		if err != nil || over != "" {
			t.Errorf("page %s: elements overflow their box: %s (%v)", page, over, err)
		}
	}
}
