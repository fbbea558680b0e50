package tests

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestSlots_backfillAndGuard (issue 26): serve --max-run-slots 3 refuses
// a 4-slot submit; then one worker with 3 slots, two
// 1-slot runs holding 2 of them, then a 3-slot run, then a steady stream
// of 1-slot runs that never leaves 3 slots free at once. The big run does
// not stop the namespace: 1-slot runs submitted after it start before it
// (backfill). And it is not starved: once it has waited --slot-guard the
// freed slots are held for it, it runs, and 1-slot runs submitted before it
// started wait until it has its slots. Order, not timing, is asserted.
func TestSlots_backfillAndGuard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	srv := redistest.Start(t)
	url := srv.URL()
	const ns = "hol"
	rdb, err := storage.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st := storeOn(t, rdb, ns)
	cliURL(t, url, ns, "group", "set", "big", "--policy", "wait", "--max-active", "1")
	StartProc(t, "w0", "--redis", url, "-n", ns, "worker", "--simulate", "--slots", "3", "--advertise", "127.0.0.1:7970")
	StartProc(t, "host-0", "--redis", url, "-n", ns, "serve", "--advertise", "127.0.0.1:7971",
		"--lease-ttl", rtLeaseTTL.String(), "--admin-addr", "", "--slot-guard", "1s", "--max-run-slots", "3")
	WaitFor(t, 15*time.Second, "a leader", func() bool { return leaderURL(t, url, ns).Identity != "" })
	// The leader's --max-run-slots is the namespace's: more is refused at
	// submit (exit 2), nothing written.
	var errs string
	WaitFor(t, 10*time.Second, "submit --slots 4 refused", func() bool {
		var code int
		_, errs, code = RunCLIErr(t, "--redis", url, "-n", ns, "submit", "big", "--id", "toobig", "--slots", "4")
		return code == 2
	})
	if !strings.Contains(errs, "takes at most 3 (the leader's serve --max-run-slots)") {
		t.Fatalf("refusal: %q", errs)
	}
	if _, err := st.GetRun(ctx, "toobig"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the refused run was written: %v", err)
	}

	submit := func(group, id string, slots int, d time.Duration) {
		t.Helper()
		if _, err := st.Submit(ctx, storage.SubmitRequest{Group: group, ID: id, Slots: slots, Duration: d}); err != nil {
			t.Fatalf("submit %s: %v", id, err)
		}
	}
	// 2 s: long enough that the big run and the stream meet them busy on a
	// loaded machine (with 400 ms they had finished once before the big
	// run launched, and nothing could pass it)
	for i := range 2 {
		submit(fmt.Sprintf("s%d", i), fmt.Sprintf("pre%d", i), 1, 2*time.Second)
	}
	WaitFor(t, 10*time.Second, "two slots busy", func() bool {
		n := 0
		for i := range 2 {
			if r, err := st.GetRun(ctx, fmt.Sprintf("pre%d", i)); err == nil && r.State == storage.StateRunning {
				n++
			}
		}
		return n == 2
	})
	submit("big", "big", 3, 200*time.Millisecond)
	WaitFor(t, 10*time.Second, "the 3-slot run LAUNCHED, waiting for slots", func() bool {
		r, err := st.GetRun(ctx, "big")
		return err == nil && r.State == storage.StateLaunched
	})
	// The stream: a 1-slot run every 100 ms for 3 s, each in its own group,
	// each 250 ms long: at most ~3 run at once, a slot frees every ~85 ms.
	var small []string
	for i := range 30 {
		id := fmt.Sprintf("small%02d", i)
		submit(fmt.Sprintf("g%02d", i), id, 1, 250*time.Millisecond)
		small = append(small, id)
		time.Sleep(100 * time.Millisecond)
	}
	all := WaitAllFinal(t, st, 60*time.Second)
	bigRun := all["big"]
	if bigRun.State != storage.StateSucceeded || len(bigRun.Assignments) != 3 {
		t.Fatalf("big: %s with %d slots (%s)", bigRun.State, len(bigRun.Assignments), bigRun.Reason)
	}
	var before, after []string // small runs started before / after big started
	for _, id := range small {
		r := all[id]
		if r.State != storage.StateSucceeded {
			t.Fatalf("%s: %s (%s)", id, r.State, r.Reason)
		}
		if r.StartedAt.Before(bigRun.StartedAt) {
			before = append(before, id)
		} else {
			after = append(after, id)
		}
	}
	sort.Strings(before)
	if len(before) == 0 {
		t.Fatalf("no 1-slot run submitted after the 3-slot run started before it: head-of-line blocking")
	}
	// Held: some run submitted before big started waited for it.
	held := 0
	for _, id := range after {
		if all[id].SubmittedAt.Before(bigRun.StartedAt) {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("no 1-slot run waited for the held 3-slot run (before %v, after %v)", before, after)
	}
	t.Logf("big waited %v for slots; %d small runs started before it (backfill), %d submitted before its start waited for it (guard)",
		bigRun.StartedAt.Sub(bigRun.SubmittedAt).Round(time.Millisecond), len(before), held)
}
