package storage_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// BenchmarkStorage_cycle measures what Redis spends on the three scripts
// of a run's life in the shape of the 1,000-group bench: a round is one
// run submitted to each of 32 groups (wait, max_active 1, 9 more runs
// waiting behind it) in one submit call, their 32 decisions (launch the
// oldest, placed on free slots) in one apply call, and their 32 reports
// in one report call. It reports each script's server time per run
// (INFO commandstats: evalsha usec, read around each phase on the
// benchmark's own redis-server), the count that tells one script build
// from another without the noise of a whole bench:
//
//	go test ./storage -run '^$' -bench BenchmarkStorage_cycle -benchtime 200x
func BenchmarkStorage_cycle(b *testing.B) {
	const groups, depth = 32, 10
	e := newEnv(b, "redis", realSrv.URL())
	f := e.lead(b, "L#1#a")
	mustNil(b, e.s.RegisterWorker(ctx, "wk#1", 64, time.Hour))
	seq := 0
	submit := func() {
		reqs := make([]storage.SubmitRequest, groups)
		for g := range reqs {
			seq++
			reqs[g] = storage.SubmitRequest{Group: fmt.Sprintf("g%03d", g), ID: fmt.Sprintf("r%07d", seq), Payload: "p"}
		}
		for _, r := range e.s.SubmitBatch(ctx, reqs) {
			mustNil(b, r.Err)
		}
	}
	for range depth {
		submit()
	}
	usec := func() float64 {
		s, err := e.c.Info(ctx, "commandstats").Result()
		mustNil(b, err)
		return evalshaUsec(s)
	}
	var tSub, tApply, tRep float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		ds := make([]storage.GroupDecision, groups)
		for g := range ds {
			name := fmt.Sprintf("g%03d", g)
			sn, err := e.s.Snapshot(ctx, name)
			mustNil(b, err)
			ds[g] = storage.GroupDecision{Group: name, Decision: storage.Decision{Version: sn.Group.Version,
				ClaimID: fmt.Sprintf("c-%s-%d", name, sn.Group.Version), Policy: "wait", PolicyVersion: "1", View: true,
				Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: sn.Waiting[0].ID}}}}
		}
		b.StartTimer()
		u0 := usec()
		for _, r := range e.s.ApplyBatch(ctx, f, ds) {
			mustNil(b, r.Err)
		}
		u1 := usec()
		b.StopTimer()
		reps := make([]storage.ReportReq, groups)
		for g, d := range ds {
			id := d.Decision.Actions[0].Run
			r, err := e.s.GetRun(ctx, id)
			mustNil(b, err)
			reps[g] = storage.ReportReq{Group: d.Group, Run: id, Token: r.Assignments[0].Token, Outcome: storage.StateSucceeded}
		}
		b.StartTimer()
		u2 := usec()
		for _, err := range e.s.ReportBatch(ctx, "wk#1", reps) {
			mustNil(b, err)
		}
		u3 := usec()
		submit()
		u4 := usec()
		tApply += u1 - u0
		tRep += u3 - u2
		tSub += u4 - u3
	}
	runs := float64(b.N * groups)
	b.ReportMetric(tSub/runs, "submit-us/run")
	b.ReportMetric(tApply/runs, "apply-us/run")
	b.ReportMetric(tRep/runs, "report-us/run")
	b.ReportMetric((tSub+tApply+tRep)/runs, "redis-us/run")
}

// evalshaUsec reads the usec of cmdstat_evalsha from INFO commandstats.
func evalshaUsec(info string) float64 {
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(l, "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(strings.TrimSpace(rest), ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					n, _ := strconv.ParseFloat(v, 64)
					return n
				}
			}
		}
	}
	return 0
}
