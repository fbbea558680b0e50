package storage_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_SetGroup(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		g := ok(e.s.SetGroup(ctx, "g", "", 0))(t)
		if g.Policy != "wait" || g.MaxActive != 1 || g.Version != 1 {
			t.Fatalf("SetGroup defaults = %+v", g)
		}
		g = ok(e.s.SetGroup(ctx, "g", "priority", 3))(t)
		if g.Policy != "priority" || g.MaxActive != 3 || g.Version != 2 {
			t.Fatalf("SetGroup = %+v", g)
		}
		if got := ok(e.s.GetGroup(ctx, "g"))(t); !reflect.DeepEqual(got, g) {
			t.Fatalf("GetGroup = %+v, want %+v", got, g)
		}
		// Only what is given changes.
		if g = ok(e.s.SetGroup(ctx, "g", "discard", 0))(t); g.Policy != "discard" || g.MaxActive != 3 {
			t.Fatalf("SetGroup(policy only) = %+v, want max_active 3 kept", g)
		}
		if g = ok(e.s.SetGroup(ctx, "g", "", 5))(t); g.Policy != "discard" || g.MaxActive != 5 || g.Version != 4 {
			t.Fatalf("SetGroup(max_active only) = %+v, want policy discard kept", g)
		}
		if g = ok(e.s.SetGroup(ctx, "g", "priority", 3))(t); g.Policy != "priority" || g.MaxActive != 3 || g.Version != 5 {
			t.Fatalf("SetGroup = %+v", g)
		}
		if d := ok(e.s.DirtyGroups(ctx, 10))(t); len(d) != 1 || d[0] != "g" {
			t.Fatalf("dirty = %v", d)
		}
		for _, tc := range []struct {
			name, group, policy string
			max                 int
			want                error
		}{
			{"negative", "g", "wait", -1, storage.ErrInvalid},
			{"brace", "a{b", "wait", 1, storage.ErrInvalid},
			{"space", "a b", "wait", 1, storage.ErrInvalid},
			{"empty", "", "wait", 1, storage.ErrInvalid},
			{"policy-space", "g", "w x", 1, storage.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if _, err := e.s.SetGroup(ctx, tc.group, tc.policy, tc.max); !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
				})
			})
		}
		if _, err := e.s.GetGroup(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("GetGroup(unknown) = %v", err)
		}
		gs := ok(e.s.ListGroups(ctx))(t)
		if len(gs) != 1 || gs[0].Name != "g" {
			t.Fatalf("ListGroups = %+v", gs)
		}
	})
}

func TestStore_Submit(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		r1 := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1", Payload: "p", Duration: 1500 * time.Millisecond, Priority: 7}))(t)
		r2 := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "h", Slots: 2}))(t)
		if r1.Seq != 1 || r2.Seq != 2 || r1.State != storage.StateWaiting || r2.Slots != 2 || r2.ID == "" || r1.SubmittedAt.IsZero() {
			t.Fatalf("submit = %+v %+v", r1, r2)
		}
		got := ok(e.s.GetRun(ctx, "r1"))(t)
		if got.Payload != "p" || got.Duration != 1500*time.Millisecond || got.Priority != 7 || got.Slots != 1 || got.Group != "g" {
			t.Fatalf("GetRun = %+v", got)
		}
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if g.Policy != "wait" || g.MaxActive != 1 || g.Version != 1 || g.Waiting != 1 {
			t.Fatalf("auto group = %+v", g)
		}
		for _, tc := range []struct {
			name string
			req  storage.SubmitRequest
			want error
		}{
			{"duplicate", storage.SubmitRequest{Group: "g", ID: "r1"}, storage.ErrDuplicate},
			{"negative-slots", storage.SubmitRequest{Group: "g", ID: "r9", Slots: -1}, storage.ErrInvalid},
			{"group-brace", storage.SubmitRequest{Group: "g}", ID: "r9"}, storage.ErrInvalid},
			{"id-space", storage.SubmitRequest{Group: "g", ID: "r 9"}, storage.ErrInvalid},
			{"empty-group", storage.SubmitRequest{ID: "r9"}, storage.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if _, err := e.s.Submit(ctx, tc.req); !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
				})
			})
		}
		if _, err := e.s.GetRun(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("GetRun(unknown) = %v", err)
		}
		rs := ok(e.s.ListRuns(ctx, storage.RunFilter{Group: "g"}))(t)
		if len(rs) != 1 || rs[0].ID != "r1" {
			t.Fatalf("ListRuns = %+v", rs)
		}
		if rs := ok(e.s.ListRuns(ctx, storage.RunFilter{}))(t); len(rs) != 2 || rs[0].Seq != 2 {
			t.Fatalf("ListRuns all = %+v", rs)
		}
	})
}

// setup: group g with runs w1..wN WAITING; leader fence.
func setupGroup(t *testing.T, e *env, n int) storage.Fence {
	t.Helper()
	ok(e.s.SetGroup(ctx, "g", "wait", 5))(t)
	for i := 1; i <= n; i++ {
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "w" + string(rune('0'+i))}))(t)
	}
	return e.lead(t, "L#1#a")
}

func TestStore_Snapshot(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := setupGroup(t, e, 3)
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		if sn.Group.Version != 4 || len(sn.Waiting) != 3 || len(sn.Active) != 0 || sn.Waiting[0].ID != "w1" || sn.Waiting[2].ID != "w3" || sn.Now.IsZero() {
			t.Fatalf("snapshot = %+v", sn)
		}
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c1", Policy: "wait", PolicyVersion: "1",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "w2"}}}))(t)
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		if len(sn.Active) != 1 || sn.Active[0].ID != "w2" || sn.Active[0].State != storage.StateLaunched || sn.Active[0].Policy != "wait" || len(sn.Waiting) != 2 {
			t.Fatalf("snapshot after launch = %+v", sn)
		}
		if _, err := e.s.Snapshot(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("snapshot(unknown) = %v", err)
		}
		if _, err := e.s.Snapshot(ctx, "a{b"); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("snapshot(bad) = %v", err)
		}
	})
}

func TestStore_Apply(t *testing.T) {
	launch := func(id string) storage.Action { return storage.Action{Kind: storage.ActionLaunch, Run: id} }
	discard := func(id string) storage.Action {
		return storage.Action{Kind: storage.ActionDiscard, Run: id, Reason: "d"}
	}
	stop := func(id string) storage.Action { return storage.Action{Kind: storage.ActionStop, Run: id, Reason: "s"} }
	backends(t, func(t *testing.T, e *env) {
		// Each case gets its own namespace: g has w1..w4 WAITING; w1 LAUNCHED
		// (claim c0), w2 RUNNING; other group h has run x1.
		prep := func(t *testing.T) (*env, storage.Fence, int64) {
			e := e.fresh(t)
			f := setupGroup(t, e, 4)
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "h", ID: "x1"}))(t)
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			v = ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c0", Actions: []storage.Action{launch("w1"), launch("w2")}}))(t)
			if err := e.s.RegisterWorker(ctx, "wk#1", 2, time.Minute); err != nil {
				t.Fatal(err)
			}
			storagetest.AllocateOne(t, ctx, e.s, f, "w2")
			return e, f, v
		}
		for _, tc := range []struct {
			name    string
			fence   func(f storage.Fence) storage.Fence
			version int64 // offset from the current version
			claim   string
			acts    []storage.Action
			want    error
		}{
			{name: "fenced-epoch", fence: func(f storage.Fence) storage.Fence { f.Epoch--; return f }, acts: []storage.Action{launch("w3")}, want: storage.ErrFenced},
			{name: "fenced-holder", fence: func(f storage.Fence) storage.Fence { f.Holder = "X#1#b"; return f }, acts: []storage.Action{launch("w3")}, want: storage.ErrFenced},
			{name: "duplicate-claim", claim: "c0", acts: []storage.Action{launch("w3")}, want: storage.ErrDuplicate},
			{name: "duplicate-claim-before-version", claim: "c0", version: -1, acts: []storage.Action{launch("w3")}, want: storage.ErrDuplicate},
			{name: "stale", version: -1, acts: []storage.Action{launch("w3")}, want: storage.ErrStale},
			{name: "launch-launched", acts: []storage.Action{launch("w3"), launch("w1")}, want: storage.ErrBadState},
			{name: "discard-running", acts: []storage.Action{discard("w2")}, want: storage.ErrBadState},
			{name: "stop-waiting", acts: []storage.Action{stop("w3")}, want: storage.ErrBadState},
			{name: "unknown-run", acts: []storage.Action{launch("w3"), launch("nope")}, want: storage.ErrNotFound},
			{name: "other-group", acts: []storage.Action{launch("x1")}, want: storage.ErrNotFound},
			{name: "two-actions-one-run", acts: []storage.Action{launch("w3"), discard("w3")}, want: storage.ErrInvalid},
			{name: "unknown-kind", acts: []storage.Action{{Kind: "explode", Run: "w3"}}, want: storage.ErrInvalid},
			{name: "bad-run-name", acts: []storage.Action{launch("w{3")}, want: storage.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e, f, v := prep(t)
				if tc.fence != nil {
					f = tc.fence(f)
				}
				claim := tc.claim
				if claim == "" {
					claim = "c-" + tc.name
				}
				e.unchanged(t, func() {
					_, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: v + tc.version, ClaimID: claim, Actions: tc.acts})
					if !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
				})
			})
		}
		t.Run("fenced-lock-moved", func(t *testing.T) {
			e, f, v := prep(t)
			e.c.Set(ctx, keyspace.Of(e.s).Lock(), "Y#2#c", time.Minute)
			e.unchanged(t, func() {
				if _, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c9", Actions: []storage.Action{launch("w3")}}); !errors.Is(err, storage.ErrFenced) {
					t.Fatalf("err = %v", err)
				}
			})
		})
		t.Run("all-kinds", func(t *testing.T) {
			e, f, v := prep(t)
			nv := ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c1", Policy: "priority", PolicyVersion: "3",
				Actions: []storage.Action{launch("w4"), discard("w3"), stop("w1"), stop("w2")}}))(t)
			if nv != v+1 {
				t.Fatalf("version %d, want %d", nv, v+1)
			}
			// w4 is placed on a free slot by the apply itself
			want := map[string]storage.State{"w1": storage.StateStopped, "w2": storage.StateStopping, "w3": storage.StateDiscarded, "w4": storage.StateRunning}
			for id, st := range want {
				r := ok(e.s.GetRun(ctx, id))(t)
				if r.State != st {
					t.Errorf("%s = %s, want %s", id, r.State, st)
				}
			}
			if r := ok(e.s.GetRun(ctx, "w4"))(t); r.Policy != "priority" || r.PolicyVersion != "3" || r.LaunchedAt.IsZero() ||
				!r.StartedAt.Equal(r.LaunchedAt) || len(r.Assignments) != 1 {
				t.Errorf("w4 = %+v", r)
			}
			for id, act := range map[string]storage.ActionKind{"w4": storage.ActionLaunch, "w3": storage.ActionDiscard, "w1": storage.ActionStop} {
				d := ok(e.s.GetRun(ctx, id))(t).Decision
				if d == nil || d.ID != "c1" || d.Epoch != f.Epoch || d.Action != act || d.Policy != "priority" || d.PolicyVersion != "3" || d.At.IsZero() {
					t.Errorf("%s's decision record %+v", id, d)
				}
			}
			if r := ok(e.s.GetRun(ctx, "w3"))(t); r.Reason != "d" || r.FinishedAt.IsZero() {
				t.Errorf("w3 = %+v", r)
			}
			if l := ok(e.s.LaunchedRuns(ctx, 10))(t); len(l) != 0 {
				t.Errorf("launched = %v, want none (w1 stopped, w4 placed)", l)
			}
			// nothing waiting any more: group clean
			if d := ok(e.s.DirtyGroups(ctx, 0))(t); strings.Contains(strings.Join(d, ","), "g") && !contains(d, "h") {
				t.Errorf("dirty = %v", d)
			}
			if contains(ok(e.s.DirtyGroups(ctx, 0))(t), "g") {
				t.Errorf("g still dirty with nothing waiting")
			}
		})
		t.Run("settle", func(t *testing.T) {
			e, f, _ := prep(t)
			// a decision is complete for its snapshot: the launch apply
			// leaves g clean although it still has WAITING runs
			if contains(ok(e.s.DirtyGroups(ctx, 0))(t), "g") {
				t.Fatal("g dirty after a non-empty apply (re-dirty removed)")
			}
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "w8"}))(t)
			if !contains(ok(e.s.DirtyGroups(ctx, 0))(t), "g") {
				t.Fatal("g not dirty after submit")
			}
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			// stale settle: nothing
			e.unchanged(t, func() {
				if _, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: v - 1}); !errors.Is(err, storage.ErrStale) {
					t.Fatalf("stale settle = %v", err)
				}
			})
			if nv := ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v}))(t); nv != v {
				t.Fatalf("settle bumped version %d -> %d", v, nv)
			}
			if contains(ok(e.s.DirtyGroups(ctx, 0))(t), "g") {
				t.Fatal("g dirty after settle")
			}
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "w9"}))(t)
			if !contains(ok(e.s.DirtyGroups(ctx, 0))(t), "g") {
				t.Fatal("g not dirty after submit")
			}
		})
		t.Run("replay-claim", func(t *testing.T) {
			e, f, v := prep(t)
			d := storage.Decision{Version: v, ClaimID: "c7", Actions: []storage.Action{launch("w3")}}
			ok(e.s.Apply(ctx, f, "g", d))(t)
			e.unchanged(t, func() {
				if _, err := e.s.Apply(ctx, f, "g", d); !errors.Is(err, storage.ErrDuplicate) {
					t.Fatalf("replay = %v", err)
				}
			})
		})
	})
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestStore_RequestStop(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := setupGroup(t, e, 4)
		v := ok(e.s.GetGroup(ctx, "g"))(t).Version
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c", Actions: []storage.Action{{Kind: "launch", Run: "w2"}, {Kind: "launch", Run: "w3"}}}))(t)
		if err := e.s.RegisterWorker(ctx, "wk", 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		as := storagetest.AllocateOne(t, ctx, e.s, f, "w3")
		for _, tc := range []struct {
			run  string
			want storage.State
			err  error
		}{
			{"w1", storage.StateDiscarded, nil},
			{"w2", storage.StateStopped, nil},
			{"w3", storage.StateStopping, nil},
			{"w1", "", storage.ErrBadState},
			{"nope", "", storage.ErrNotFound},
			{"n p", "", storage.ErrInvalid},
		} {
			t.Run(tc.run+"-"+string(tc.want), func(t *testing.T) {
				r, err := e.s.RequestStop(ctx, tc.run, "user")
				if !errors.Is(err, tc.err) || (err == nil && r.State != tc.want) {
					t.Fatalf("RequestStop(%s) = %v %v, want %s %v", tc.run, r.State, err, tc.want, tc.err)
				}
			})
		}
		if a := ok(e.s.ActiveRunIDs(ctx))(t); len(a) != 1 || a[0] != "w3" {
			t.Fatalf("active = %v", a)
		}
		// The run finished just before its worker saw the stop: STOPPING
		// only leads to STOPPED, the reported outcome kept in the reason.
		mustNil(t, e.s.Report(ctx, as[0].Worker, "w3", as[0].Token, storage.StateSucceeded, "exit 0"))
		r := ok(e.s.GetRun(ctx, "w3"))(t)
		if r.State != storage.StateStopped || r.Reason != "stop requested; the run had already finished SUCCEEDED: exit 0" {
			t.Fatalf("after a SUCCEEDED report of a STOPPING run: %s %q", r.State, r.Reason)
		}
	})
}

func TestStore_DeleteGroup(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		for i := range 1203 { // more than two chunks
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("w%04d", i)}))(t)
		}
		t.Run("unknown", func(t *testing.T) {
			e.unchanged(t, func() {
				if _, err := e.s.DeleteGroup(ctx, "nope", true, "x"); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			})
		})
		t.Run("waiting without force", func(t *testing.T) {
			e.unchanged(t, func() {
				if _, err := e.s.DeleteGroup(ctx, "g", false, "x"); !errors.Is(err, storage.ErrBadState) || !strings.Contains(err.Error(), "1203 waiting") {
					t.Fatalf("err = %v, want ErrBadState naming the waiting runs", err)
				}
			})
		})
		n, err := e.s.DeleteGroup(ctx, "g", true, "group deleted")
		if err != nil || n != 1203 {
			t.Fatalf("DeleteGroup(force) = %d, %v; want 1203 discarded", n, err)
		}
		if _, err := e.s.GetGroup(ctx, "g"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("GetGroup after delete: %v", err)
		}
		for _, g := range ok(e.s.ListGroups(ctx))(t) {
			if g.Name == "g" {
				t.Fatal("deleted group still listed")
			}
		}
		if d := ok(e.s.DirtyGroups(ctx, 10))(t); len(d) != 0 {
			t.Fatalf("dirty after delete: %v", d)
		}
		if r := ok(e.s.GetRun(ctx, "w0600"))(t); r.State != storage.StateDiscarded || r.Reason != "group deleted" {
			t.Fatalf("a discarded run: %+v", r)
		}
		// Active runs: refused even with force.
		ok(e.s.SetGroup(ctx, "h", "wait", 1))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "h", ID: "h1"}))(t)
		f := e.lead(t, "leader#1")
		sn := ok(e.s.Snapshot(ctx, "h"))(t)
		ok(e.s.Apply(ctx, f, "h", storage.Decision{Version: sn.Group.Version, ClaimID: "c1",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "h1", Reason: "test"}}}))(t)
		e.unchanged(t, func() {
			if _, err := e.s.DeleteGroup(ctx, "h", true, "x"); !errors.Is(err, storage.ErrBadState) || !strings.Contains(err.Error(), "1 active") {
				t.Fatalf("err = %v, want ErrBadState naming the active run", err)
			}
		})
	})
}

func TestRunPage_Cursor(t *testing.T) {
	f := storage.RunFilter{Group: "g:1", State: storage.StateWaiting, Limit: 5}
	c := storage.RunPage{Next: 42}.Cursor(f)
	got, err := storage.ParseCursor(c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Group != "g:1" || got.State != storage.StateWaiting || got.Below != 42 || got.Limit != 0 {
		t.Fatalf("ParseCursor(Cursor) = %+v", got)
	}
	if c := (storage.RunPage{}).Cursor(f); c != "" {
		t.Fatalf("last page cursor = %q, want empty", c)
	}
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"no version", "abc"},
		{"not base64", "c1.!!!"},
		{"wrong shape", "c1." + base64.RawURLEncoding.EncodeToString([]byte("g\x0042"))},
		{"zero seq", "c1." + base64.RawURLEncoding.EncodeToString([]byte("g\x00\x000"))},
		{"bad state", "c1." + base64.RawURLEncoding.EncodeToString([]byte("g\x00NOPE\x007"))},
		{"bad group", "c1." + base64.RawURLEncoding.EncodeToString([]byte("a b\x00\x007"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := storage.ParseCursor(tc.in); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("ParseCursor(%q) = %v, want ErrInvalid", tc.in, err)
			}
		})
	}
}

// TestStore_Submit_idempotency: the same key with the same request is the
// same run (the second call returns the stored run, replayed); the key
// with another request (another id or priority) is ErrConflict, nothing
// written; another key is another run; an oversized key is ErrInvalid,
// nothing written.
func TestStore_Submit_idempotency(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		first, replayed, err := e.s.SubmitReplay(ctx, storage.SubmitRequest{Group: "g", Priority: 7, IdempotencyKey: "order-42"})
		mustNil(t, err)
		if replayed {
			t.Fatal("first submit reported replayed")
		}
		again, replayed, err := e.s.SubmitReplay(ctx, storage.SubmitRequest{Group: "g", Priority: 7, IdempotencyKey: "order-42"})
		mustNil(t, err)
		if !replayed || again.ID != first.ID || again.Seq != first.Seq || again.Priority != 7 {
			t.Fatalf("second submit = %+v replayed %v, want run %s (seq %d, priority 7)", again, replayed, first.ID, first.Seq)
		}
		for _, req := range []storage.SubmitRequest{
			{Group: "g", ID: "other-id", Priority: 7, IdempotencyKey: "order-42"},
			{Group: "g", Priority: 8, IdempotencyKey: "order-42"},
		} {
			if _, _, err := e.s.SubmitReplay(ctx, req); !errors.Is(err, storage.ErrConflict) || !strings.Contains(err.Error(), first.ID) {
				t.Fatalf("the key with another request %+v: %v, want ErrConflict naming %s", req, err, first.ID)
			}
		}
		if _, err := e.s.GetRun(ctx, "other-id"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("the refused call made run other-id: %v", err)
		}
		other, replayed, err := e.s.SubmitReplay(ctx, storage.SubmitRequest{Group: "g", IdempotencyKey: "order-43"})
		mustNil(t, err)
		if replayed || other.ID == first.ID {
			t.Fatalf("another key = %+v replayed %v", other, replayed)
		}
		e.unchanged(t, func() {
			_, _, err := e.s.SubmitReplay(ctx, storage.SubmitRequest{Group: "g", IdempotencyKey: strings.Repeat("k", limits.MaxIdempotencyKey+1)})
			if !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("oversized key = %v", err)
			}
		})
		// the key names its run for IdempotencyTTL
		ttl, err := e.c.PTTL(ctx, keyspace.Of(e.s).Idempotency(digest.SHA256([]byte("order-42")))).Result()
		mustNil(t, err)
		if ttl <= storage.IdempotencyTTL-time.Minute || ttl > storage.IdempotencyTTL {
			t.Fatalf("idempotency key ttl %v, want about %v", ttl, storage.IdempotencyTTL)
		}
	})
}

// TestStore_Submit_bounds: an oversized payload or stop reason is
// ErrInvalid and writes nothing.
func TestStore_Submit_bounds(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a", Payload: strings.Repeat("p", limits.MaxPayload)}))(t)
		e.unchanged(t, func() {
			if _, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "b", Payload: strings.Repeat("p", limits.MaxPayload+1)}); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("oversized payload = %v", err)
			}
			if _, err := e.s.RequestStop(ctx, "a", strings.Repeat("r", storage.MaxStopReason+1)); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("oversized reason = %v", err)
			}
		})
	})
}

// TestStore_bulkDeletesAreChunked: deleting a namespace of 3,000 keys
// unlinks at most storage.UnlinkChunk keys per command, and deleting a
// group of 450 waiting runs (force) discards at most 100 per script, so
// no one command holds Redis for long. Counted with a command hook.
func TestStore_bulkDeletesAreChunked(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		reqs := make([]storage.SubmitRequest, 450)
		for i := range reqs {
			reqs[i] = storage.SubmitRequest{Group: "big", ID: fmt.Sprintf("r%04d", i)}
		}
		for _, r := range e.s.SubmitBatch(ctx, reqs) {
			mustNil(t, r.Err)
		}
		for i := range 2500 {
			mustNil(t, e.c.Set(ctx, keyspace.Of(e.s).Prefix()+fmt.Sprintf("junk:%d", i), "x", 0).Err())
		}
		rec := redistest.Record(e.c)
		rec.NameScripts(storage.ScriptName)
		n, err := e.s.DeleteGroup(ctx, "big", true, "bulk")
		mustNil(t, err)
		if n != 450 {
			t.Fatalf("discarded %d, want 450", n)
		}
		calls := 0
		for _, c := range rec.Commands() {
			if c.Name == "script delete_group" {
				calls++
				if c.Keys > 11+100 {
					t.Fatalf("a delete_group call with %d keys: more than 100 runs in one script", c.Keys)
				}
			}
		}
		if calls < 5 {
			t.Fatalf("%d delete_group calls for 450 runs, want at least 5 (100 a call)", calls)
		}
		rec.Reset()
		deleted, err := e.s.DeleteNamespace(ctx)
		mustNil(t, err)
		if deleted < 2500 {
			t.Fatalf("deleted %d keys, want the 2,500 and the runs'", deleted)
		}
		for _, c := range rec.Commands() {
			if c.Name == "UNLINK" && c.Args > storage.UnlinkChunk {
				t.Fatalf("an UNLINK of %d keys, more than %d", c.Args, storage.UnlinkChunk)
			}
		}
		if rec.Count("UNLINK") < deleted/storage.UnlinkChunk {
			t.Fatalf("%d UNLINKs for %d keys", rec.Count("UNLINK"), deleted)
		}
	})
}
