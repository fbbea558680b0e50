package storage_test

import (
	"slices"
	"strings"
	"time"

	"testing"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_ListpackValue(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		n, found := e.s.ListpackValue(ctx)
		if e.backend == "embedded" {
			// the embedded store keeps no hash encodings: it does not say
			if found {
				t.Fatalf("embedded store: %d, want no value", n)
			}
			return
		}
		if !found || n != 64 {
			t.Fatalf("a fresh redis-server: %d (%v), want its default 64", n, found)
		}
		// (a setting of the server's encodings only: the suite's other
		// tests do not depend on it)
		mustNil(t, e.c.ConfigSet(ctx, "hash-max-listpack-value", "512").Err())
		t.Cleanup(func() { e.c.ConfigSet(ctx, "hash-max-listpack-value", "64") })
		if n, found := e.s.ListpackValue(ctx); !found || n != storage.CompactRecordsValue {
			t.Fatalf("after CONFIG SET 512: %d (%v)", n, found)
		}
		// a run's record is a listpack at this setting, a hashtable at 64
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Hour))
		ok(e.s.SetGroup(ctx, "g", "wait", 2))(t)
		for _, tc := range []struct {
			run, setting, want string
		}{{"r1", "512", "listpack"}, {"r2", "64", "hashtable"}} {
			mustNil(t, e.c.ConfigSet(ctx, "hash-max-listpack-value", tc.setting).Err())
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: tc.run}))(t)
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			res := e.s.ApplyBatch(ctx, f, []storage.GroupDecision{{Group: "g", Decision: storage.Decision{Version: v,
				ClaimID: "claim-" + tc.run, Policy: "wait", PolicyVersion: "0123456789ab",
				PolicySHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				Actions:      []storage.Action{{Kind: storage.ActionLaunch, Run: tc.run, Reason: "oldest waiting run, below max_active"}}}}})
			mustNil(t, res[0].Err)
			if r := ok(e.s.GetRun(ctx, tc.run))(t); r.State != storage.StateRunning {
				t.Fatalf("%s is %s, want RUNNING", tc.run, r.State)
			}
			if enc := ok(e.c.ObjectEncoding(ctx, keyspace.Of(e.s).Run(tc.run)).Result())(t); enc != tc.want {
				t.Errorf("%s launched at hash-max-listpack-value %s: %s, want %s", tc.run, tc.setting, enc, tc.want)
			}
		}
	})
}

func TestStore_Submit_defaultFieldsNotWritten(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		for _, tc := range []struct {
			name    string
			req     storage.SubmitRequest
			written []string
		}{
			{"defaults", storage.SubmitRequest{ID: "d"}, nil},
			{"priority, payload, duration", storage.SubmitRequest{ID: "p", Priority: -3, Payload: "x", Duration: 10 * time.Millisecond},
				[]string{"priority", "payload", "duration_ms"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.req.Group = "g"
				ok(e.s.Submit(ctx, tc.req))(t)
				for _, f := range []string{"priority", "payload", "duration_ms"} {
					want := slices.Contains(tc.written, f)
					if got := ok(e.c.HExists(ctx, keyspace.Of(e.s).Run(tc.req.ID), f).Result())(t); got != want {
						t.Errorf("field %s written %v, want %v", f, got, want)
					}
				}
				r := ok(e.s.GetRun(ctx, tc.req.ID))(t)
				if r.Priority != tc.req.Priority || r.Payload != tc.req.Payload || r.Duration != tc.req.Duration || r.Slots != 1 {
					t.Fatalf("run %+v, want priority %d payload %q duration %v slots 1", r, tc.req.Priority, tc.req.Payload,
						tc.req.Duration)
				}
			})
		}
	})
}

func TestStore_Report_noEmptyReason(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 4, time.Hour))
		ok(e.s.SetGroup(ctx, "g", "wait", 4))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "once"}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "again", Retry: storage.Retry{MaxAttempts: 2, Base: time.Millisecond,
			Cap: time.Millisecond}}))(t)
		report := func(id string, o storage.State, reason string) {
			t.Helper()
			r := ok(e.s.GetRun(ctx, id))(t)
			mustNil(t, e.s.ReportBatch(ctx, "wA", []storage.ReportReq{{Group: "g", Run: id, Token: r.Assignments[0].Token,
				Outcome: o, Reason: reason}})[0])
		}
		launch(t, e, f, "g", "once", "again")
		report("once", storage.StateSucceeded, "")
		if ok(e.c.HExists(ctx, keyspace.Of(e.s).Run("once"), "reason").Result())(t) {
			t.Error("a run without a reason got an empty reason field")
		}
		// a retried run's reason is replaced by its last attempt's ('' here)
		report("again", storage.StateFailed, "boom")
		if r := ok(e.s.GetRun(ctx, "again"))(t); r.State != storage.StateWaiting || !strings.Contains(r.Reason, "boom") {
			t.Fatalf("again is %s (%q), want WAITING for its second attempt", r.State, r.Reason)
		}
		for deadline := time.Now().Add(5 * time.Second); e.c.ZScore(ctx, keyspace.Of(e.s).Waiting("g"), "again").Err() != nil; {
			if time.Now().After(deadline) {
				t.Fatal("the retry was not due in 5s")
			}
			time.Sleep(5 * time.Millisecond)
			mustNil(t, e.s.DueBatch(ctx, f, []string{"g"})[0].Err)
		}
		launch(t, e, f, "g", "again")
		report("again", storage.StateSucceeded, "")
		if r := ok(e.s.GetRun(ctx, "again"))(t); r.State != storage.StateSucceeded || r.Reason != "" {
			t.Fatalf("again is %s with reason %q, want SUCCEEDED with none", r.State, r.Reason)
		}
	})
}
