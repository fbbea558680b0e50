package storage_test

import (
	"time"

	"testing"

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
			if enc := ok(e.c.ObjectEncoding(ctx, e.s.Keys().Run(tc.run)).Result())(t); enc != tc.want {
				t.Errorf("%s launched at hash-max-listpack-value %s: %s, want %s", tc.run, tc.setting, enc, tc.want)
			}
		}
	})
}
