package storage_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

func labels(kv ...string) []abi.Label {
	var out []abi.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, abi.Label{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// TestStore_Submit_labels: a run keeps its labels (sorted), a snapshot
// carries them on waiting runs (from the index) and on active ones, the
// listing filters by them, and bad labels are refused naming the label,
// with nothing written.
func TestStore_Submit_labels(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		r := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a", Labels: labels("tenant", "acme", "ref", "main")}))(t)
		if want := labels("ref", "main", "tenant", "acme"); !reflect.DeepEqual(r.Labels, want) {
			t.Fatalf("submitted labels %v, want %v", r.Labels, want)
		}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "b", Labels: labels("ref", "dev, with a comma=and equals")}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "c"}))(t)
		if got := ok(e.s.GetRun(ctx, "b"))(t).Labels; !reflect.DeepEqual(got, labels("ref", "dev, with a comma=and equals")) {
			t.Fatalf("stored labels %v", got)
		}
		sn := e.s.SnapshotBatch(ctx, []string{"g"})[0]
		mustNil(t, sn.Err)
		if w := sn.Snapshot.Waiting; len(w) != 3 || w[0].Label("tenant") != "acme" || w[1].Label("ref") != "dev, with a comma=and equals" ||
			w[2].Labels != nil || w[0].Attempt != 1 {
			t.Fatalf("snapshot waiting %+v", w)
		}
		launch(t, e, f, "g", "a")
		sn = e.s.SnapshotBatch(ctx, []string{"g"})[0]
		if a := sn.Snapshot.Active; len(a) != 1 || a[0].Label("tenant") != "acme" {
			t.Fatalf("snapshot active %+v", a)
		}
		page := ok(e.s.ListRunsPage(ctx, storage.RunFilter{Labels: labels("ref", "main")}))(t)
		if len(page.Runs) != 1 || page.Runs[0].ID != "a" {
			t.Fatalf("runs with ref=main: %+v", page.Runs)
		}
		page = ok(e.s.ListRunsPage(ctx, storage.RunFilter{Labels: labels("ref", "main", "tenant", "other")}))(t)
		if len(page.Runs) != 0 {
			t.Fatalf("runs with ref=main, tenant=other: %+v", page.Runs)
		}
		// a cursor carries the label filter
		p1 := ok(e.s.ListRunsPage(ctx, storage.RunFilter{Labels: labels("ref", "main"), Limit: 1}))(t)
		if c := p1.Cursor(storage.RunFilter{Labels: labels("ref", "main")}); c != "" {
			pf := ok(storage.ParseCursor(c))(t)
			if !reflect.DeepEqual(pf.Labels, labels("ref", "main")) {
				t.Fatalf("cursor filter %+v", pf)
			}
		}

		bad := map[string][]abi.Label{
			"the key must be 1 to":   labels("", "x"),
			"may hold only":          labels("Tenant", "x"),
			"the value is 257 bytes": labels("k", strings.Repeat("v", 257)),
			"control character":      labels("k", "a\nb"),
			"given twice":            labels("k", "1", "k", "2"),
			"17 labels, at most 16": func() (ls []abi.Label) {
				for i := range 17 {
					ls = append(ls, abi.Label{Key: string(rune('a' + i))})
				}
				return
			}(),
			"1 to 64 bytes": labels(strings.Repeat("k", 65), "x"),
		}
		for want, ls := range bad {
			e.unchanged(t, func() {
				_, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "bad", Labels: ls})
				if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), want) {
					t.Errorf("labels %q: err %v, want ErrInvalid saying %q", ls, err, want)
				}
			})
		}
		// at the bounds: 16 labels, 64-byte keys, 256-byte values
		var max []abi.Label
		for i := range abi.MaxLabels {
			max = append(max, abi.Label{Key: strings.Repeat(string(rune('a'+i)), abi.MaxKeyLen), Value: strings.Repeat("v", abi.MaxValueLen)})
		}
		r = ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "max", Labels: max}))(t)
		sn = e.s.SnapshotBatch(ctx, []string{"g"})[0]
		if w := sn.Snapshot.Waiting; len(w[len(w)-1].Labels) != abi.MaxLabels || w[len(w)-1].Labels[15].Value != max[15].Value {
			t.Fatalf("snapshot of a run at the bounds: %+v", w[len(w)-1])
		}
	})
}

// TestStore_GroupParams: parameters merge (an empty value removes one),
// replace, survive a change of policy, are bounded, and a snapshot
// carries them.
func TestStore_GroupParams(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		g := ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Policy: "wait", Params: labels("period", "2s", "max_wait", "30s")}))(t)
		if want := labels("max_wait", "30s", "period", "2s"); !reflect.DeepEqual(g.Params, want) {
			t.Fatalf("params %v, want %v", g.Params, want)
		}
		g = ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Params: labels("period", "5s", "max_wait", "")}))(t)
		if want := labels("period", "5s"); !reflect.DeepEqual(g.Params, want) {
			t.Fatalf("merged params %v, want %v", g.Params, want)
		}
		g = ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Policy: "discard"}))(t)
		if want := labels("period", "5s"); !reflect.DeepEqual(g.Params, want) || g.Policy != "discard" {
			t.Fatalf("a new policy kept params %v, want %v", g.Params, want)
		}
		if got := ok(e.s.GetGroup(ctx, "g"))(t).Params; !reflect.DeepEqual(got, labels("period", "5s")) {
			t.Fatalf("GetGroup params %v", got)
		}
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		if !reflect.DeepEqual(sn.Group.Params, labels("period", "5s")) {
			t.Fatalf("snapshot params %v", sn.Group.Params)
		}
		g = ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{ReplaceParams: true, Params: labels("limit", "3")}))(t)
		if want := labels("limit", "3"); !reflect.DeepEqual(g.Params, want) {
			t.Fatalf("replaced params %v, want %v", g.Params, want)
		}
		var many []abi.Label
		for i := range abi.MaxParams {
			many = append(many, abi.Label{Key: "p" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Value: "1"})
		}
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{ReplaceParams: true, Params: many}))(t)
		e.unchanged(t, func() {
			// one more by merge: 33 after the change
			_, err := e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Params: labels("zz", "1")})
			if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "33 policy parameters, at most 32") {
				t.Fatalf("33rd parameter: %v", err)
			}
			_, err = e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Params: labels("Bad", "1")})
			if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "parameter") {
				t.Fatalf("bad name: %v", err)
			}
		})
	})
}

// TestStore_Launches: every launch goes on the group's launches list with
// its time and labels (oldest first in a snapshot), bounded.
func TestStore_Launches(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroup(ctx, "g", "wait", 1000))(t)
		for i := range abi.MaxLaunches + 10 {
			id := "r" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id, Labels: labels("n", id)}))(t)
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			_, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: id, History: true,
				Actions: []storage.Action{{Kind: storage.ActionLaunch, Run: id}}})
			mustNil(t, err)
		}
		sn := e.s.SnapshotBatch(ctx, []string{"g"})[0].Snapshot
		if len(sn.Launches) != abi.MaxLaunches {
			t.Fatalf("%d launches in the snapshot, want %d", len(sn.Launches), abi.MaxLaunches)
		}
		last := sn.Launches[len(sn.Launches)-1]
		if last.Labels[0].Value != "r"+string(rune('a'+(abi.MaxLaunches+9)%26))+string(rune('a'+(abi.MaxLaunches+9)/26)) || last.At == 0 {
			t.Fatalf("newest launch %+v", last)
		}
		for i := 1; i < len(sn.Launches); i++ {
			if sn.Launches[i].At < sn.Launches[i-1].At {
				t.Fatalf("launches not oldest first at %d", i)
			}
		}
		if n := e.c.LLen(ctx, keyspace.Of(e.s).Launches("g")).Val(); n > 2*abi.MaxLaunches {
			t.Fatalf("launches list has %d entries, bound %d", n, 2*abi.MaxLaunches)
		}
		// a report hands back no snapshot for a group with a history (its
		// snapshot carries the launches), but the parameters when it does
		if _, sn := storage.ParseWorkEvent("g\x1fwait\x1f1\x1f7\x1f0\x1f0\x1f1\x1f5\x1f0\x1f0\x1fPk=v\x1dz=1"); sn == nil ||
			!reflect.DeepEqual(sn.Group.Params, labels("k", "v", "z", "1")) {
			t.Fatalf("handback with params: %+v", sn)
		}
		// a decision by a policy that does not read them drops them
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "plain"}))(t)
		launch(t, e, f, "g", "plain")
		if n := e.c.Exists(ctx, keyspace.Of(e.s).Launches("g")).Val(); n != 0 || len(e.s.SnapshotBatch(ctx, []string{"g"})[0].Snapshot.Launches) != 0 {
			t.Fatal("the history outlived a decision without it")
		}
	})
}

// TestStore_Wake: a decision's wake is kept in the group (the earliest),
// held to the minimum interval and the horizon, put on the group's timer;
// the due script fires it (the group dirty, not bumped) and clears it.
func TestStore_Wake(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		settle := func(wake int64) {
			t.Helper()
			v := ok(e.s.GetGroup(ctx, "g"))(t).Version
			_, err := e.s.Apply(ctx, f, "g", storage.Decision{Version: v, WakeAt: wake})
			mustNil(t, err)
		}
		now := time.Now().UnixMilli()
		settle(now + 1) // held to the minimum interval
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if d := g.WakeAt.UnixMilli() - now; d < abi.MinWakeInterval-50 || d > abi.MinWakeInterval+1000 {
			t.Fatalf("wake %v ms ahead, want about %d", d, abi.MinWakeInterval)
		}
		if n := e.c.SCard(ctx, keyspace.Of(e.s).Dirty()).Val(); n != 0 {
			t.Fatalf("a wake-only decision left the group dirty")
		}
		first := g.WakeAt
		settle(now + 60_000) // later than the pending one: the earliest stays
		if got := ok(e.s.GetGroup(ctx, "g"))(t).WakeAt; !got.Equal(first) {
			t.Fatalf("wake moved to %v, want the earliest %v", got, first)
		}
		sc := e.c.ZScore(ctx, keyspace.Of(e.s).Timers(), "g").Val()
		if int64(sc) != first.UnixMilli() {
			t.Fatalf("timer %v, want the wake %v", sc, first.UnixMilli())
		}
		v0 := ok(e.s.GetGroup(ctx, "g"))(t).Version
		time.Sleep(time.Until(first) + 20*time.Millisecond)
		r := due(t, e, f, "g")
		if !r.Woken || r.Moved != 0 || !r.Next.IsZero() {
			t.Fatalf("due = %+v, want woken with nothing next", r)
		}
		g = ok(e.s.GetGroup(ctx, "g"))(t)
		if !g.WakeAt.IsZero() || g.Version != v0 || e.c.SIsMember(ctx, keyspace.Of(e.s).Dirty(), "g").Val() != true {
			t.Fatalf("after the wake: %+v, want no wake, version %d, dirty", g, v0)
		}
		if e.c.ZScore(ctx, keyspace.Of(e.s).Timers(), "g").Err() == nil {
			t.Fatal("the timer is still set")
		}
		// a wake beyond the horizon is moved in; one in the past is soon
		settle(1 << 62)
		if d := ok(e.s.GetGroup(ctx, "g"))(t).WakeAt.UnixMilli() - time.Now().UnixMilli(); d > abi.MaxWakeAhead || d < abi.MaxWakeAhead-60_000 {
			t.Fatalf("far wake %d ms ahead, want the horizon %d", d, abi.MaxWakeAhead)
		}
		settle(1) // in the past: the earliest, at the minimum interval
		if d := ok(e.s.GetGroup(ctx, "g"))(t).WakeAt.UnixMilli() - time.Now().UnixMilli(); d > abi.MinWakeInterval {
			t.Fatalf("past wake %d ms ahead, want at most %d", d, abi.MinWakeInterval)
		}
	})
}

// TestStore_Series: points are appended under the fence (a stale leader's
// are refused), read back oldest first from a time, a group's list expires
// after its last point; GroupCounts counts waiting (delayed too), active
// and finished-since runs and the slots.
func TestStore_Series(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "w1", 3, time.Minute))
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a"}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "b"}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "c", NotBefore: time.Now().Add(time.Hour)}))(t)
		launch(t, e, f, "g", "a")
		pts, used, total, err := e.s.GroupCounts(ctx, []string{"g"}, time.Now().Add(-time.Minute))
		mustNil(t, err)
		if p := pts["g"]; p.Waiting != 2 || p.Active != 1 || p.Finishes != 0 || used != 1 || total != 3 {
			t.Fatalf("counts %+v, slots %d of %d", p, used, total)
		}
		t0 := time.Now().Add(-time.Second).Truncate(time.Millisecond)
		for i := range 3 {
			at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			mustNil(t, e.s.RecordSeries(ctx, f, storage.SeriesPoint{At: at, Launches: i, SlotsUsed: 1, SlotsTotal: 3},
				map[string]storage.SeriesPoint{"g": {At: at, Launches: i, Waiting: 2, WaitP95: 1500 * time.Millisecond}}))
		}
		ns := ok(e.s.Series(ctx, "", t0.Add(50*time.Millisecond)))(t)
		if len(ns) != 2 || ns[0].Launches != 1 || ns[1].SlotsTotal != 3 || !ns[1].At.Equal(t0.Add(200*time.Millisecond)) {
			t.Fatalf("namespace series %+v", ns)
		}
		gs := ok(e.s.Series(ctx, "g", time.Time{}))(t)
		if len(gs) != 3 || gs[2].WaitP95 != 1500*time.Millisecond || gs[2].Waiting != 2 {
			t.Fatalf("group series %+v", gs)
		}
		if ttl := e.c.PTTL(ctx, keyspace.Of(e.s).GroupSeries("g")).Val(); ttl < 24*time.Hour {
			t.Fatalf("a group's series expires in %v, want about %v", ttl, storage.SeriesLifetime)
		}
		// a stale leader writes nothing
		e.lead(t, "L#2#b")
		e.unchanged(t, func() {
			if err := e.s.RecordSeries(ctx, f, storage.SeriesPoint{At: time.Now()}, nil); !errors.Is(err, storage.ErrFenced) {
				t.Fatalf("a deposed leader's point: %v", err)
			}
		})
	})
}

// TestStore_Submit_maxRunSlots: a run (or a schedule's runs) asking more
// than MaxRunSlots slots is refused, nothing written: it could only sit
// LAUNCHED holding up the namespace's queue (issue 26).
func TestStore_Submit_maxRunSlots(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "max", Slots: limits.MaxRunSlots}))(t)
		e.unchanged(t, func() {
			_, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "huge", Slots: 100_000})
			if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "slots 100000: at most 1024") {
				t.Fatalf("a 100,000-slot run: %v", err)
			}
			_, err = e.s.SetSchedule(ctx, storage.Schedule{Name: "s", Group: "g", Cron: "@hourly", Slots: limits.MaxRunSlots + 1})
			if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "at most 1024") {
				t.Fatalf("a schedule of 1,025-slot runs: %v", err)
			}
		})
	})
}
