package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestEngine_retentionAcrossFailover: the retention task removes the
// finished runs older than the retention and never a waiting or active
// one; when a new term starts, the deposed term's task is fenced and the
// new leader's removes what finished since.
func TestEngine_retentionAcrossFailover(t *testing.T) {
	e := newREnv(t, Config{Retention: 30 * time.Millisecond, RetentionInterval: 5 * time.Millisecond})
	ctx := context.Background()
	e.group("g", "discard", 1)
	discard := func(ids ...string) {
		t.Helper()
		sn, err := e.st.Snapshot(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		var acts []storage.Action
		for _, id := range ids {
			acts = append(acts, storage.Action{Kind: storage.ActionDiscard, Run: id, Reason: "test"})
		}
		if _, err := storagetest.Apply(ctx, e.st, e.lease.Fence(), "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c-" + ids[0], Actions: acts}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(id string) bool {
		_, err := e.st.GetRun(ctx, id)
		return errors.Is(err, storage.ErrNotFound)
	}
	for _, id := range []string{"a1", "a2", "b1", "keep"} {
		e.submit("g", id, 1)
	}
	discard("a1", "a2")
	stop1 := e.runTask(e.rt.retention)
	waitFor(t, 5*time.Second, "a1 and a2 expired", func() bool { return gone("a1") && gone("a2") })

	e.newTerm() // a failover: the old lease is now fenced in storage
	discard("b1")
	if err := stop1(); err != nil && !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("the deposed term's retention task: %v", err)
	}
	if gone("b1") {
		t.Fatal("b1 removed before a leader of the new term ran")
	}
	e.runTask(e.rt.retention)
	waitFor(t, 5*time.Second, "b1 expired by the new leader", func() bool { return gone("b1") })
	time.Sleep(60 * time.Millisecond)
	if gone("keep") {
		t.Fatal("a WAITING run was removed")
	}
	if got := e.metric("wasmsched_expired_runs_total"); got != 3 {
		t.Fatalf("wasmsched_expired_runs_total %v, want 3", got)
	}
}
