package storage_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// BenchmarkStorage measures each script on the real redis-server, one
// client, sequential calls (a round trip each).
//
//	go test ./storage -run '^$' -bench BenchmarkStorage -benchtime 2s
func BenchmarkStorage(b *testing.B) {
	b.Run("submit", func(b *testing.B) {
		e := newEnv(b, "redis", realSrv.URL())
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%d", i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("snapshot-10", func(b *testing.B) {
		e := newEnv(b, "redis", realSrv.URL())
		for i := 0; i < 10; i++ {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g"}))(b)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := e.s.Snapshot(ctx, "g"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("apply-launch", func(b *testing.B) {
		e := newEnv(b, "redis", realSrv.URL())
		f := e.lead(b, "L#1#a")
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g"}))(b).ID
		}
		v := ok(e.s.GetGroup(ctx, "g"))(b).Version
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var err error
			v, err = e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: ids[i], Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: ids[i]}}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("snapshot+apply-cycle", func(b *testing.B) {
		e := newEnv(b, "redis", realSrv.URL())
		f := e.lead(b, "L#1#a")
		for i := 0; i < 10; i++ {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g"}))(b)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sn, err := e.s.Snapshot(ctx, "g")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: sn.Group.Version}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("allocate", func(b *testing.B) {
		e := newEnv(b, "redis", realSrv.URL())
		f := e.lead(b, "L#1#a")
		if err := e.s.RegisterWorker(ctx, "wk", 64, time.Hour); err != nil {
			b.Fatal(err)
		}
		ids := make([]string, b.N)
		var acts []storage.Action
		for i := range ids {
			ids[i] = ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g"}))(b).ID
			acts = append(acts, storage.Action{Kind: storage.ActionLaunch, Run: ids[i]})
		}
		v := ok(e.s.GetGroup(ctx, "g"))(b).Version
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c", Actions: acts}))(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			as, err := storagetest.TryAllocateOne(ctx, e.s, f, ids[i])
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer() // free the slot again (report), outside the measurement
			if err := e.s.Report(ctx, as[0].Worker, ids[i], as[0].Token, storage.StateSucceeded, ""); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	// allocate-batch-32: one AllocateBatch of 32 one-slot runs per op
	// (ns/op / 32 = per run); the slots are freed outside the measurement.
	b.Run("allocate-batch-32", func(b *testing.B) {
		const n = 32
		e := newEnv(b, "redis", realSrv.URL())
		f := e.lead(b, "L#1#a")
		if err := e.s.RegisterWorker(ctx, "wk", 128, time.Hour); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			ids := make([]string, n)
			var acts []storage.Action
			for j := range ids {
				ids[j] = ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g"}))(b).ID
				acts = append(acts, storage.Action{Kind: storage.ActionLaunch, Run: ids[j]})
			}
			v := ok(e.s.GetGroup(ctx, "g"))(b).Version
			ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: fmt.Sprint("c", i), Actions: acts}))(b)
			b.StartTimer()
			res, err := e.s.AllocateBatch(ctx, f, ids)
			if err != nil || len(res) != n || res[n-1].Outcome != storage.AllocAllocated {
				b.Fatal(err, res)
			}
			b.StopTimer()
			for _, r := range res {
				if err := e.s.Report(ctx, r.Assignments[0].Worker, r.Run, r.Assignments[0].Token, storage.StateSucceeded, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	})
}
