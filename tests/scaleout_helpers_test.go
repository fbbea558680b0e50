package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/storage"
)

// Helpers for the scale-out tests: the same CLI helpers as the runtime
// tests, but against any --redis value (cluster or sentinel URL).

// cliURL runs a CLI command against url / ns and fails unless it exits 0.
func cliURL(t testing.TB, url, ns string, args ...string) string {
	t.Helper()
	out, code := RunCLI(t, append([]string{"--redis", url, "-n", ns}, args...)...)
	if code != 0 {
		t.Fatalf("wasmsched -n %s %s: exit %d: %s", ns, strings.Join(args, " "), code, out)
	}
	return out
}

// leaderURL runs `leader -o json` against url / ns.
func leaderURL(t testing.TB, url, ns string) client.Leader {
	t.Helper()
	out := cliURL(t, url, ns, "leader", "-o", "json")
	var v client.Leader
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("leader -o json: %v: %q", err, out)
	}
	return v
}

// leaderAmong polls `leader -o json` for ns until its leader is one of
// hosts (by identity) and returns it; it fails the test after d.
func leaderAmong(t testing.TB, url, ns string, hosts map[string]*Proc, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l := leaderURL(t, url, ns)
		if hosts[l.Identity] != nil {
			return l.Identity
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s: leader %q, not one of our hosts after %v", ns, l.Identity, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveMulti starts `serve --namespaces LIST` (admin server off).
func serveMulti(t testing.TB, name, url string, namespaces []string, advertise string, ttl time.Duration, extra ...string) *Proc {
	t.Helper()
	args := append([]string{"--redis", url, "serve", "--namespaces", strings.Join(namespaces, ","),
		"--advertise", advertise, "--lease-ttl", ttl.String(), "--admin-addr", ""}, extra...)
	return StartProc(t, name, args...)
}

// workerURL starts a simulating worker on url / ns with a journal.
func workerURL(t testing.TB, name, url, ns, advertise string, slots int) (*Proc, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), name+".journal")
	p := StartProc(t, name, "--redis", url, "-n", ns, "worker", "--simulate",
		"--slots", strconv.Itoa(slots), "--advertise", advertise,
		"--heartbeat-ttl", rtHeartbeatTTL.String(), "--journal", journal)
	return p, journal
}

// storeOn opens a Store for ns on client c.
func storeOn(t testing.TB, c redis.UniversalClient, ns string) *storage.Store {
	t.Helper()
	st, err := storage.New(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// leaders reads every namespace's leader identity through the stores
// ("" = none).
func leaders(ctx context.Context, sts map[string]*storage.Store) map[string]string {
	out := map[string]string{}
	for ns, st := range sts {
		li, err := st.Leader(ctx)
		if err == nil {
			out[ns] = li.Identity
		}
	}
	return out
}

// countBy counts namespaces per leader identity.
func countBy(ls map[string]string) map[string]int {
	m := map[string]int{}
	for _, id := range ls {
		m[id]++
	}
	return m
}

// checkJournals fails the test for a run executed twice, a SUCCEEDED run
// not executed exactly once, or a journal entry of an unknown run.
func checkJournals(t testing.TB, all map[string]storage.Run, journals map[string]string) {
	t.Helper()
	ex := ExecutionsByRun(ReadJournals(t, journals))
	for id, run := range all {
		n := len(ex[id])
		switch {
		case n > 1:
			t.Errorf("run %s (%s) executed %d times: %v", id, run.State, n, ex[id])
		case run.State == storage.StateSucceeded && n != 1:
			t.Errorf("run %s SUCCEEDED with %d executions", id, n)
		}
	}
	for id := range ex {
		if _, ok := all[id]; !ok {
			t.Errorf("journal has unknown run %s", id)
		}
	}
}

// distribution renders leaders-per-host counts by process name, sorted,
// with "none" for namespaces without a leader: "host-0=5 host-1=4 none=3".
func distribution(by map[string]int, hosts map[string]*Proc) string {
	var parts []string
	for id, n := range by {
		name := "none"
		if p := hosts[id]; p != nil {
			name = p.Name
		} else if id != "" {
			name = "other:" + id
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
