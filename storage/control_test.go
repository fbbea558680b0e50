package storage_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// TestStore_PauseGroup: a paused group's snapshot says so (the leader
// decides nothing), a decision made before the pause is stale, a submit
// to it queues without marking it dirty, and resume marks it dirty; an
// unknown group is ErrNotFound.
func TestStore_PauseGroup(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a"}))(t)
		before := ok(e.s.Snapshot(ctx, "g"))(t)
		mustNil(t, e.s.PauseGroup(ctx, "g", "ops"))
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if !g.Paused || g.PausedBy != "ops" || g.PausedAt.IsZero() {
			t.Fatalf("paused group %+v", g)
		}
		if sn := ok(e.s.Snapshot(ctx, "g"))(t); !sn.Group.Paused {
			t.Fatal("the snapshot of a paused group does not say so")
		}
		d := storage.Decision{Version: before.Group.Version, ClaimID: "pre-pause", Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "a"}}}
		if r := e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: d}})[0]; !errors.Is(r.Err, storage.ErrStale) {
			t.Fatalf("a decision from before the pause: %v, want ErrStale", r.Err)
		}
		mustNil(t, e.c.Del(ctx, keyspace.Of(e.s).Dirty()).Err())
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "b"}))(t)
		if e.c.SIsMember(ctx, keyspace.Of(e.s).Dirty(), "g").Val() {
			t.Fatal("a submit to a paused group marked it dirty")
		}
		mustNil(t, e.s.ResumeGroup(ctx, "g"))
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Paused || g.PausedBy != "" || g.Waiting != 2 {
			t.Fatalf("resumed group %+v", g)
		}
		if !e.c.SIsMember(ctx, keyspace.Of(e.s).Dirty(), "g").Val() {
			t.Fatal("resume did not mark the group dirty")
		}
		if err := e.s.PauseGroup(ctx, "nosuch", "ops"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("pause of an unknown group: %v", err)
		}
	})
}

// TestStore_DiscardWaiting_StopActive: the bulk actions: every waiting
// run (the not-yet-due ones too) discarded in chunks with the reason, the
// active ones left; then every active run asked to stop.
func TestStore_DiscardWaiting_StopActive(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		ok(e.s.SetGroup(ctx, "g", "wait", 2))(t)
		var reqs []storage.SubmitRequest
		for i := range 250 {
			r := storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%03d", i)}
			if i%5 == 0 {
				r.NotBefore = time.Now().Add(time.Hour)
			}
			reqs = append(reqs, r)
		}
		for _, r := range e.s.SubmitBatch(ctx, reqs) {
			mustNil(t, r.Err)
		}
		launch(t, e, f, "g", "r001", "r002") // RUNNING on wA's two slots
		n := ok(e.s.DiscardWaiting(ctx, "g", "clean-up"))(t)
		if n != 248 {
			t.Fatalf("discarded %d, want 248", n)
		}
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if g.Waiting != 0 || g.Delayed != 0 || g.Active != 2 {
			t.Fatalf("after the discard: %+v", g)
		}
		if r := ok(e.s.GetRun(ctx, "r000"))(t); r.State != storage.StateDiscarded || r.Reason != "clean-up" {
			t.Fatalf("a delayed run after the discard: %s %q", r.State, r.Reason)
		}
		if n := ok(e.s.StopActive(ctx, "g", "enough"))(t); n != 2 {
			t.Fatalf("stopped %d, want 2", n)
		}
		for _, id := range []string{"r001", "r002"} {
			if r := ok(e.s.GetRun(ctx, id))(t); r.State != storage.StateStopping || r.Reason != "enough" {
				t.Fatalf("%s after the stop: %s %q", id, r.State, r.Reason)
			}
		}
		if _, err := e.s.DiscardWaiting(ctx, "nosuch", ""); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("discard of an unknown group: %v", err)
		}
	})
}

// TestStore_bulkByLabel: a bulk discard or stop by label moves only the
// runs carrying every label given (over several chunks, due and delayed
// runs alike) and reports how many; the others stay as they were.
func TestStore_bulkByLabel(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroup(ctx, "g", "wait", 5))(t)
		for i := range 250 {
			ref := "main"
			if i%2 == 1 {
				ref = "dev"
			}
			req := storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%03d", i), Labels: labels("ref", ref, "n", fmt.Sprint(i%5))}
			if i >= 240 {
				req.NotBefore = time.Now().Add(time.Hour) // delayed ones too
			}
			ok(e.s.Submit(ctx, req))(t)
		}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "act-dev", Labels: labels("ref", "dev")}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "act-main", Labels: labels("ref", "main")}))(t)
		launch(t, e, f, "g", "act-dev", "act-main")
		n := ok(e.s.DiscardWaiting(ctx, "g", "clean dev", labels("ref", "dev")...))(t)
		if n != 125 {
			t.Fatalf("discarded %d dev runs, want 125", n)
		}
		n = ok(e.s.DiscardWaiting(ctx, "g", "clean", labels("ref", "main", "n", "0")...))(t)
		if n != 25 { // main runs are the even i; n=0 among them: i%10 == 0
			t.Fatalf("discarded %d main n=0 runs, want 25", n)
		}
		for i := range 250 {
			r := ok(e.s.GetRun(ctx, fmt.Sprintf("r%03d", i)))(t)
			gone := i%2 == 1 || i%10 == 0
			if (r.State == storage.StateDiscarded) != gone {
				t.Fatalf("run %s is %s (reason %q)", r.ID, r.State, r.Reason)
			}
		}
		if n := ok(e.s.StopActive(ctx, "g", "stop dev", labels("ref", "dev")...))(t); n != 1 {
			t.Fatalf("stopped %d, want 1", n)
		}
		if r := ok(e.s.GetRun(ctx, "act-main"))(t); r.State.Final() || r.State == storage.StateStopping {
			t.Fatalf("act-main is %s: a stop by another label touched it", r.State)
		}
		if _, err := e.s.DiscardWaiting(ctx, "g", "x", labels("Bad", "1")...); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("a bad label: %v", err)
		}
		if _, err := e.s.DiscardWaiting(ctx, "nosuch", "x", labels("ref", "dev")...); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("an unknown group: %v", err)
		}
	})
}
