package storage_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// TestStore_Expire: retention removes exactly the finished runs older than
// the group's retention (SUCCEEDED, DISCARDED, STOPPED; every script that
// ends a run indexes it), with their index entries, and never a WAITING or
// active one; 0 keeps forever, the group's own setting beats the default,
// a stale epoch is fenced, and nothing is removed before its time.
func TestStore_Expire(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{MaxActive: 3}))(t)
		for _, id := range []string{"done", "discarded", "stopped", "running", "waiting"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
		}
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c1", Actions: []storage.Action{
			{Kind: storage.ActionLaunch, Run: "done"}, {Kind: storage.ActionLaunch, Run: "running"},
			{Kind: storage.ActionLaunch, Run: "stopped"}, {Kind: storage.ActionDiscard, Run: "discarded", Reason: "x"}}}))(t)
		mustNil(t, e.s.RegisterWorker(ctx, "w#1#a", 4, time.Minute))
		as := ok(e.s.AllocateBatch(ctx, f, []string{"done", "running"}))(t)
		mustNil(t, e.s.Report(ctx, as[0].Assignments[0].Worker, "done", as[0].Assignments[0].Token, storage.StateSucceeded, ""))
		ok(e.s.RequestStop(ctx, "stopped", "operator"))(t)

		// nothing is old enough for a day's retention
		if n, _, err := e.s.Expire(ctx, f, "g", 24*time.Hour, 0); err != nil || n != 0 {
			t.Fatalf("expire with a day's retention: %d, %v", n, err)
		}
		time.Sleep(20 * time.Millisecond)
		// forever: the group says 0
		forever := time.Duration(0)
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: &forever}))(t)
		if n, _, err := e.s.Expire(ctx, f, "g", 10*time.Millisecond, 0); err != nil || n != 0 {
			t.Fatalf("expire with retention 0 (forever): %d, %v", n, err)
		}
		def := storage.RetentionDefault
		g := ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: &def}))(t)
		if g.Retention != storage.RetentionDefault {
			t.Fatalf("retention %v after RetentionDefault", g.Retention)
		}
		if _, _, err := e.s.Expire(ctx, storage.Fence{Epoch: f.Epoch - 1, Holder: f.Holder}, "g", 10*time.Millisecond, 0); !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("expire by a stale epoch: %v, want ErrFenced", err)
		}
		n, more, err := e.s.Expire(ctx, f, "g", 10*time.Millisecond, 2)
		if err != nil || n != 2 || !more {
			t.Fatalf("first chunk of 2: %d %v %v", n, more, err)
		}
		n, more, err = e.s.Expire(ctx, f, "g", 10*time.Millisecond, 2)
		if err != nil || n != 1 || more {
			t.Fatalf("second chunk: %d %v %v", n, more, err)
		}
		for _, id := range []string{"done", "discarded", "stopped"} {
			if _, err := e.s.GetRun(ctx, id); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("%s: %v, want it removed", id, err)
			}
		}
		for _, id := range []string{"running", "waiting"} {
			if _, err := e.s.GetRun(ctx, id); err != nil {
				t.Errorf("%s removed: %v", id, err)
			}
		}
		runs := ok(e.s.ListRuns(ctx, storage.RunFilter{}))(t)
		if got := fmt.Sprint(len(runs)); got != "2" {
			t.Errorf("ListRuns after expire: %d runs, want the 2 unfinished (index entries removed too)", len(runs))
		}
		if n := e.c.ZCard(ctx, keyspace.Of(e.s).Finished("g")).Val(); n != 0 {
			t.Errorf("finished index still holds %d", n)
		}
	})
}

// TestStore_SetGroupSettings_retention: a negative retention other than
// RetentionDefault, or one below a millisecond, is ErrInvalid and writes
// nothing.
func TestStore_SetGroupSettings_retention(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		for _, d := range []time.Duration{-2 * time.Second, time.Microsecond} {
			e.unchanged(t, func() {
				if _, err := e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: &d}); !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("retention %v: %v, want ErrInvalid", d, err)
				}
			})
		}
		week := 7 * 24 * time.Hour
		if g := ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Retention: &week}))(t); g.Retention != week {
			t.Fatalf("retention %v, want a week", g.Retention)
		}
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Retention != week {
			t.Fatalf("GetGroup retention %v", g.Retention)
		}
	})
}

// TestStore_ListRunsPage: pages of newest-first runs chain through Next
// (Below = the last seq listed) without gaps or repeats, filters apply
// across pages, and the last page says there is no next one.
func TestStore_ListRunsPage(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		var batch []storage.SubmitRequest
		for i := range 1201 {
			g := "a"
			if i%3 == 0 {
				g = "b"
			}
			batch = append(batch, storage.SubmitRequest{Group: g, ID: fmt.Sprintf("r%04d", i)})
		}
		for lo := 0; lo < len(batch); lo += 400 {
			for _, r := range e.s.SubmitBatch(ctx, batch[lo:min(lo+400, len(batch))]) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
		}
		for _, c := range []struct {
			group string
			limit int
			want  int
		}{{"", 500, 1201}, {"b", 150, 401}, {"a", 1000, 800}} {
			seen := map[string]bool{}
			var below, prev int64
			pages := 0
			for {
				p, err := e.s.ListRunsPage(ctx, storage.RunFilter{Group: c.group, Limit: c.limit, Below: below})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, r := range p.Runs {
					if seen[r.ID] || (prev != 0 && r.Seq >= prev) || (c.group != "" && r.Group != c.group) {
						t.Fatalf("group %q page %d: run %s seq %d (previous %d) out of order, repeated or of another group", c.group, pages, r.ID, r.Seq, prev)
					}
					seen[r.ID], prev = true, r.Seq
				}
				if p.Next == 0 {
					break
				}
				if pages > 20 {
					t.Fatal("pages do not end")
				}
				below = p.Next
			}
			if len(seen) != c.want {
				t.Errorf("group %q limit %d: %d runs over %d pages, want %d", c.group, c.limit, len(seen), pages, c.want)
			}
		}
		if _, err := e.s.ListRunsPage(ctx, storage.RunFilter{Below: -1}); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("Below -1: %v", err)
		}
	})
}

// TestStore_Apply_decisionRecord: every run a decision names keeps the
// decision (id, epoch, time, action, the policy's reason, policy name,
// version, sha256 and registry version), and the group keeps its latest
// DecisionsKept decisions, newest first.
func TestStore_Apply_decisionRecord(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{MaxActive: 1}))(t)
		for _, id := range []string{"a", "b"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
		}
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "7:g:3", Policy: "discard",
			PolicyVersion: "abcdef012345", PolicySHA256: "abcdef0123456789", PolicyRegistry: 4,
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "a", Reason: "oldest"}, {Kind: storage.ActionDiscard, Run: "b", Reason: "busy"}}}))(t)
		for _, c := range []struct {
			id     string
			action storage.ActionKind
			reason string
		}{{"a", storage.ActionLaunch, "oldest"}, {"b", storage.ActionDiscard, "busy"}} {
			r := ok(e.s.GetRun(ctx, c.id))(t)
			d := r.Decision
			if d == nil || d.ID != "7:g:3" || d.Epoch != f.Epoch || d.At.IsZero() || d.Action != c.action || d.Reason != c.reason ||
				d.Policy != "discard" || d.PolicyVersion != "abcdef012345" || d.PolicySHA256 != "abcdef0123456789" || d.PolicyRegistry != 4 {
				t.Errorf("run %s decision %+v", c.id, d)
			}
		}
		for i := range storage.DecisionsKept + 3 {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("x%d", i)}))(t)
			sn = ok(e.s.Snapshot(ctx, "g"))(t)
			ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: fmt.Sprintf("c%d", i), Policy: "discard",
				Actions: []storage.Action{{Kind: storage.ActionDiscard, Run: fmt.Sprintf("x%d", i)}}}))(t)
		}
		ds := ok(e.s.GroupDecisions(ctx, "g"))(t)
		if len(ds) != storage.DecisionsKept || ds[0].ID != fmt.Sprintf("c%d", storage.DecisionsKept+2) || ds[0].Discarded != 1 || ds[0].Epoch != f.Epoch {
			t.Fatalf("%d decisions, newest %+v", len(ds), ds[0])
		}
		if r := ok(e.s.GetRun(ctx, "x0"))(t); r.Decision == nil {
			t.Fatal("a run's record outlives the group's trimmed history")
		}
		if _, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "w"}); err != nil {
			t.Fatal(err)
		}
		if r := ok(e.s.GetRun(ctx, "w"))(t); r.Decision != nil {
			t.Fatalf("a waiting run has a decision: %+v", r.Decision)
		}
	})
}

// TestStore_Apply_launcherKept: a run launched by one policy version and
// stopped by a decision of another keeps the launching version in Policy
// and PolicyVersion; its Decision is the stop's.
func TestStore_Apply_launcherKept(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r"}))(t)
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c1", Policy: "p", PolicyVersion: "v1",
			Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: "r"}}}))(t)
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version, ClaimID: "c2", Policy: "p", PolicyVersion: "v2",
			Actions: []storage.Action{{Kind: storage.ActionStop, Run: "r", Reason: "newer"}}}))(t)
		r := ok(e.s.GetRun(ctx, "r"))(t)
		if r.PolicyVersion != "v1" || r.Decision == nil || r.Decision.PolicyVersion != "v2" || r.Decision.Action != storage.ActionStop {
			t.Fatalf("policy_version %q, decision %+v: want the launcher v1 kept and the stop's record", r.PolicyVersion, r.Decision)
		}
	})
}

// TestStore_ExpireBatch: one pipeline expires every group's due runs, and
// reports per group (a bad name is that group's error only).
func TestStore_ExpireBatch(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		for _, g := range []string{"a", "b"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: g, ID: "r-" + g}))(t)
			ok(e.s.RequestStop(ctx, "r-"+g, "x"))(t)
		}
		time.Sleep(15 * time.Millisecond)
		res := e.s.ExpireBatch(ctx, f, []string{"a", "b{", "b"}, 10*time.Millisecond)
		if res[0].Removed != 1 || res[2].Removed != 1 || res[0].Err != nil || res[2].Err != nil || !errors.Is(res[1].Err, storage.ErrInvalid) {
			t.Fatalf("results %+v", res)
		}
		for _, id := range []string{"r-a", "r-b"} {
			if _, err := e.s.GetRun(ctx, id); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("%s: %v", id, err)
			}
		}
	})
}

// TestStore_LatestDecisions: one pipelined read gives each group its
// newest decision, nil for a group without one.
func TestStore_LatestDecisions(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		for _, g := range []string{"a", "b"} {
			ok(e.s.SetGroup(ctx, g, "wait", 5))(t)
		}
		for i, id := range []string{"r1", "r2"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "a", ID: id}))(t)
			v := ok(e.s.GetGroup(ctx, "a"))(t).Version
			ok(e.s.Apply(ctx, f, "a", storage.Decision{Version: v, ClaimID: fmt.Sprint("c", i), Policy: "wait",
				Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: id}}}))(t)
		}
		got := ok(e.s.LatestDecisions(ctx, []string{"a", "b", "nosuch"}))(t)
		if len(got) != 3 || got[0] == nil || got[0].ID != "c1" || got[0].Launched != 1 || got[1] != nil || got[2] != nil {
			t.Fatalf("latest = %+v", got)
		}
		if _, err := e.s.LatestDecisions(ctx, []string{"a b"}); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("bad name = %v", err)
		}
	})
}

// TestStore_ExpireBatch_sharedChunk: an expire call of many groups is
// fenced once and removes at most its chunk (ExpireChunk) of runs in all:
// the groups it did not finish, or did not reach, say More, and the next
// rounds go on until every due run is gone (200 due runs in each of
// three groups: 200 + 56 + 0, then 144 + 112, then 88).
func TestStore_ExpireBatch_sharedChunk(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		groups := []string{"a", "b", "c"}
		for _, g := range groups {
			var reqs []storage.SubmitRequest
			for i := range 200 {
				reqs = append(reqs, storage.SubmitRequest{Group: g, ID: fmt.Sprintf("%s-%03d", g, i)})
			}
			for _, r := range e.s.SubmitBatch(ctx, reqs) {
				mustNil(t, r.Err)
			}
			d := storage.Decision{Version: ok(e.s.GetGroup(ctx, g))(t).Version, ClaimID: "c-" + g}
			for _, r := range reqs {
				d.Actions = append(d.Actions, storage.Action{Kind: storage.ActionDiscard, Run: r.ID})
			}
			mustNil(t, e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: g, Decision: d}})[0].Err)
		}
		time.Sleep(15 * time.Millisecond)
		mustNil(t, e.s.Load(ctx))
		cc := &cmdCounter{only: "evalsha"}
		e.c.AddHook(cc)
		for round, want := range [][3]int{{200, 56, 0}, {0, 144, 112}, {0, 0, 88}} {
			res := e.s.ExpireBatch(ctx, f, groups, 10*time.Millisecond)
			for i, r := range res {
				if r.Err != nil || r.Removed != want[i] {
					t.Fatalf("round %d, group %s: %+v, want %d removed", round, groups[i], r, want[i])
				}
			}
			if more := []bool{res[0].More, res[1].More, res[2].More}; round == 0 && (more[0] || !more[1] || !more[2]) ||
				round == 2 && (more[0] || more[1] || more[2]) {
				t.Fatalf("round %d: more %v", round, more)
			}
		}
		if n := cc.n.Load(); n != 3 {
			t.Errorf("3 rounds of 3 groups took %d calls, want 3 (one a round)", n)
		}
		if n := ok(e.c.ZCard(ctx, keyspace.Of(e.s).Runs()).Result())(t); n != 0 {
			t.Errorf("%d runs left in the runs index, want 0", n)
		}
		// a stale fence: every group of the call is fenced, nothing removed
		if res := e.s.ExpireBatch(ctx, storage.Fence{Epoch: f.Epoch - 1, Holder: f.Holder}, groups, time.Millisecond); !errors.Is(res[0].Err, storage.ErrFenced) ||
			!errors.Is(res[2].Err, storage.ErrFenced) {
			t.Errorf("stale epoch: %+v, want ErrFenced for each group", res)
		}
	})
}
