package storage_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// workerOf is the worker of each slot run id holds.
func workerOf(t *testing.T, e *env, id string) []string {
	t.Helper()
	r := ok(e.s.GetRun(ctx, id))(t)
	var ws []string
	for _, a := range r.Assignments {
		ws = append(ws, a.Worker)
	}
	return ws
}

func label(k, v string) abi.Label { return abi.Label{Key: k, Value: v} }

// TestStore_placement: a group's requirements send its runs only to
// workers carrying every required label, in the apply that launches them,
// in the slot manager's allocate calls and in a restore; a worker that
// serves some groups takes no run of another; an unconstrained run takes
// an open worker's slot before a labelled one's; a run waiting for a label
// no live worker has is never held and stops nothing.
func TestStore_placement(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "cpu", 2, time.Minute))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "gpu", 2, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("gpu", "a100"), label("zone", "eu")}}))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "thumbs", 1, time.Minute, storage.WorkerPlacement{Groups: []string{"thumb*"}}))
		k := keyspace.Of(e.s)
		if sc := e.c.ZScore(ctx, k.Free(), "gpu#0").Val(); sc != 1 {
			t.Fatalf("a labelled worker's free slot has score %v, want 1", sc)
		}
		if n := e.c.HGet(ctx, k.Placement(), "#groups").Val(); n != "1" {
			t.Fatalf("workers serving only some groups: %q, want 1 (thumbs)", n)
		}
		ok(e.s.SetGroupSettings(ctx, "train", storage.GroupSettings{MaxActive: 10, Require: []abi.Label{label("gpu", "a100")}}))(t)
		ok(e.s.SetGroup(ctx, "plain", "wait", 10))(t)
		ok(e.s.SetGroup(ctx, "thumbnails", "wait", 10))(t)
		if g := ok(e.s.GetGroup(ctx, "train"))(t); fmt.Sprint(g.Require) != "[{gpu a100}]" {
			t.Fatalf("train requires %v", g.Require)
		}
		for _, id := range []string{"t1", "t2", "t3"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "train", ID: id}))(t)
		}
		for _, id := range []string{"p1", "p2", "p3", "p4"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "plain", ID: id}))(t)
		}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "thumbnails", ID: "th1"}))(t)

		// the apply places train's runs on gpu only: t3 finds no slot and queues
		if r := launch(t, e, f, "train", "t1", "t2", "t3"); r.Queued != 1 {
			t.Fatalf("train: queued %d, want 1", r.Queued)
		}
		for _, id := range []string{"t1", "t2"} {
			if ws := workerOf(t, e, id); len(ws) != 1 || ws[0] != "gpu" {
				t.Fatalf("%s on %v, want gpu", id, ws)
			}
		}
		// plain's runs go to the open worker first; the slot manager gives
		// them slots past t3, which waits for gpu and holds nothing (p3,
		// without requirements, is held: this call's guard is 0)
		launch(t, e, f, "plain", "p1", "p2", "p3", "p4") // all queue: t3 waits
		launch(t, e, f, "thumbnails", "th1")
		res := ok(e.s.AllocateBatch(ctx, f, []string{"t3", "p1", "p2", "th1", "p3", "p4"}))(t)
		got := map[string]string{}
		for _, r := range res {
			got[r.Run] = string(r.Outcome)
		}
		want := map[string]string{"t3": "no_slots", "p1": "allocated", "p2": "allocated", "th1": "allocated", "p3": "no_slots"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("allocate: %v, want %v", got, want)
		}
		if res[0].Held || !res[4].Held {
			t.Fatalf("held: t3 %v (a run with requirements: never), p3 %v (want held)", res[0].Held, res[4].Held)
		}
		for id, w := range map[string]string{"p1": "cpu", "p2": "cpu", "th1": "thumbs"} {
			if ws := workerOf(t, e, id); len(ws) != 1 || ws[0] != w {
				t.Fatalf("%s on %v, want %s", id, ws, w)
			}
		}

		// t1 finishes: t3 takes its gpu slot (the freed slot keeps score 1)
		t1 := ok(e.s.GetRun(ctx, "t1"))(t)
		mustNil(t, e.s.Report(ctx, "gpu", "t1", t1.Assignments[0].Token, storage.StateSucceeded, ""))
		if sc := e.c.ZScore(ctx, k.Free(), t1.Assignments[0].Worker+"#"+fmt.Sprint(t1.Assignments[0].Slot)).Val(); sc != 1 {
			t.Fatalf("a freed gpu slot has score %v, want 1", sc)
		}
		res = ok(e.s.AllocateBatch(ctx, f, []string{"t3"}))(t)
		if res[0].Outcome != storage.AllocAllocated || workerOf(t, e, "t3")[0] != "gpu" {
			t.Fatalf("t3: %+v on %v, want allocated on gpu", res[0], workerOf(t, e, "t3"))
		}

		// restore: t2's task moves only to a worker it may use
		_, err := e.s.RestoreApply(ctx, f, "t2", nil, []int{0})
		if !errors.Is(err, storage.ErrNoSlots) {
			t.Fatalf("restore of t2 with no free gpu slot: %v, want ErrNoSlots (cpu and thumbs are free)", err)
		}
		mustNil(t, e.s.RegisterWorkerWith(ctx, "gpu2", 1, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("gpu", "a100")}}))
		as := ok(e.s.RestoreApply(ctx, f, "t2", nil, []int{0}))(t)
		if len(as) != 1 || as[0].Worker != "gpu2" {
			t.Fatalf("restore of t2: %+v, want its task on gpu2", as)
		}

		// a worker leaving drops its profile
		th1 := ok(e.s.GetRun(ctx, "th1"))(t)
		mustNil(t, e.s.Report(ctx, "thumbs", "th1", th1.Assignments[0].Token, storage.StateSucceeded, ""))
		mustNil(t, e.s.DeregisterWorker(ctx, "thumbs"))
		if n := e.c.HLen(ctx, k.Placement()).Val(); n != 2 {
			t.Fatalf("placement hash after thumbs left: %d fields (%v), want 2 (gpu, gpu2; no #groups)", n, e.c.HKeys(ctx, k.Placement()).Val())
		}
		// a worker with groups that dies is reaped with its profile, and
		// #groups counts it out
		mustNil(t, e.s.RegisterWorkerWith(ctx, "etl", 1, 50*time.Millisecond, storage.WorkerPlacement{Groups: []string{"etl-*"}}))
		if n := e.c.HGet(ctx, k.Placement(), "#groups").Val(); n != "1" {
			t.Fatalf("#groups with etl: %q, want 1", n)
		}
		time.Sleep(150 * time.Millisecond) // its heartbeat expires (not a timing assertion: the reap below is what is checked)
		rp := ok(e.s.ReapDeadWorkers(ctx, f))(t)
		if fmt.Sprint(rp.Workers) != "[etl]" {
			t.Fatalf("reaped %+v, want etl", rp)
		}
		if e.c.HExists(ctx, k.Placement(), "#groups").Val() || e.c.HExists(ctx, k.Placement(), "etl").Val() {
			t.Fatalf("placement hash after etl was reaped: %v, want no #groups and no etl", e.c.HKeys(ctx, k.Placement()).Val())
		}
	})
}

// TestStore_placementInput: bad profiles and requirements are refused with
// ErrInvalid, nothing written.
func TestStore_placementInput(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		for name, p := range map[string]storage.WorkerPlacement{
			"label-key":   {Labels: []abi.Label{label("GPU", "x")}},
			"label-twice": {Labels: []abi.Label{label("gpu", "x"), label("gpu", "y")}},
			"group-name":  {Groups: []string{"a b"}},
		} {
			t.Run(name, func(t *testing.T) {
				e.unchanged(t, func() {
					if err := e.s.RegisterWorkerWith(ctx, "w1", 1, time.Minute, p); !errors.Is(err, storage.ErrInvalid) {
						t.Fatalf("err = %v, want ErrInvalid", err)
					}
				})
			})
		}
		t.Run("require", func(t *testing.T) {
			e.unchanged(t, func() {
				_, err := e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Require: []abi.Label{label("gpu", "a\x01")}})
				if !errors.Is(err, storage.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
			})
		})
		// none: clears
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Require: []abi.Label{label("gpu", "yes")}}))(t)
		if g := ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{Require: []abi.Label{}}))(t); g.Require != nil {
			t.Fatalf("require after clearing: %v", g.Require)
		}
	})
}

// TestStore_placementRunRequire: a run's own requirements add to its
// group's (a key in both: the run's value); they are part of its
// idempotency fingerprint; a run without any keeps the fingerprint it had.
func TestStore_placementRunRequire(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		for w, zone := range map[string]string{"eu": "eu", "us": "us"} {
			mustNil(t, e.s.RegisterWorkerWith(ctx, w, 2, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("gpu", "a100"), label("zone", zone)}}))
		}
		ok(e.s.SetGroupSettings(ctx, "train", storage.GroupSettings{MaxActive: 10, Require: []abi.Label{label("gpu", "a100")}}))(t)
		for id, req := range map[string][]abi.Label{"r-eu": {label("zone", "eu")}, "r-us": {label("zone", "us")},
			"r-ap": {label("zone", "ap")}, "r-h100": {label("gpu", "h100")}, "r-any": nil} {
			r := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "train", ID: id, Require: req}))(t)
			if fmt.Sprint(r.Require) != fmt.Sprint(req) {
				t.Fatalf("%s: submitted with %v, record says %v", id, req, r.Require)
			}
		}
		if got := ok(e.s.GetRun(ctx, "r-eu"))(t).Require; fmt.Sprint(got) != "[{zone eu}]" {
			t.Fatalf("r-eu's requirements read back as %v", got)
		}
		r := launch(t, e, f, "train", "r-eu", "r-us", "r-any")
		if r.Queued != 0 {
			t.Fatalf("queued %d, want 0", r.Queued)
		}
		for id, w := range map[string]string{"r-eu": "eu", "r-us": "us"} {
			if ws := workerOf(t, e, id); len(ws) != 1 || ws[0] != w {
				t.Fatalf("%s on %v, want %s", id, ws, w)
			}
		}
		// no worker is in zone ap; none has gpu=h100 (the run's value wins)
		if r := launch(t, e, f, "train", "r-ap", "r-h100"); r.Queued != 2 {
			t.Fatalf("r-ap, r-h100 queued %d, want 2", r.Queued)
		}
		res := ok(e.s.AllocateBatch(ctx, f, []string{"r-ap", "r-h100"}))(t)
		for _, x := range res {
			if x.Outcome != storage.AllocNoSlots || x.Held {
				t.Fatalf("%s: %+v, want no_slots, not held", x.Run, x)
			}
		}
		if fmt.Sprint(res[1].Require) != "[{gpu h100}]" {
			t.Fatalf("r-h100 is placed by %v, want its own gpu=h100 over its group's", res[1].Require)
		}
		// idempotency: the same key with other requirements is another request
		req := storage.SubmitRequest{Group: "train", IdempotencyKey: "k1", Require: []abi.Label{label("zone", "eu")}}
		ok(e.s.Submit(ctx, req))(t)
		req.Require = []abi.Label{label("zone", "us")}
		if _, err := e.s.Submit(ctx, req); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("same key, other requirements: %v, want ErrConflict", err)
		}
	})
}

// TestStore_allocateNamed: a pass that names a run's slots (placement)
// gives it those slots when they are free on a live worker that may take
// the run; a named slot taken since, on an unknown worker or on a worker
// that does not serve the run's group falls back to the first free slots
// the run may use, never to a slot another run holds.
func TestStore_allocateNamed(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := launched(t, e, 1, 2, 1, 1) // ra rb rc rd, all LAUNCHED (no worker yet)
		mustNil(t, e.s.RegisterWorker(ctx, "w1", 2, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "w2", 2, time.Minute))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "gpu", 2, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("gpu", "yes")}}))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "thumbs", 1, time.Minute, storage.WorkerPlacement{Groups: []string{"thumb*"}}))
		place := map[string][]string{
			"ra": {"w2#1"},
			"rb": {"gpu#1", "gpu#0"},
			"rc": {"w2#1", "w9#0"}, // taken by ra; an unknown worker
			"rd": {"thumbs#0"},     // does not serve group g
		}
		res := ok(e.s.AllocatePass(ctx, f, []string{"ra", "rb", "rc", "rd"}, 0, time.Hour, place))(t)
		got := map[string]string{}
		for _, r := range res {
			if r.Outcome != storage.AllocAllocated {
				t.Fatalf("%s: %s, want allocated", r.Run, r.Outcome)
			}
			var slots []string
			for _, a := range r.Assignments {
				slots = append(slots, fmt.Sprintf("%s#%d", a.Worker, a.Slot))
			}
			got[r.Run] = fmt.Sprint(slots)
		}
		want := map[string]string{"ra": "[w2#1]", "rb": "[gpu#1 gpu#0]", "rc": "[w1#0]", "rd": "[w1#1]"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("slots %v, want %v", got, want)
		}
		k := keyspace.Of(e.s)
		for _, s := range []string{"w2#1", "gpu#0", "gpu#1", "w1#0", "w1#1"} {
			if e.c.ZScore(ctx, k.Free(), s).Err() == nil {
				t.Fatalf("%s is taken and still in free", s)
			}
		}
		if n := e.c.ZCard(ctx, k.Free()).Val(); n != 2 { // w2#0, thumbs#0
			t.Fatalf("free holds %d slots, want 2", n)
		}
	})
}

// TestStore_sameWorker: a group's SameWorker, or a run's own, puts all of
// a run's slots on one worker: in the apply that launches it and in the
// slot manager's allocate calls; a run no worker can hold alone waits
// LAUNCHED (never held, nothing written for it) while smaller runs take the
// slots it passed over. The flag is on the group and run records, not
// among their requirements.
func TestStore_sameWorker(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "w1", 2, time.Minute))
		mustNil(t, e.s.RegisterWorker(ctx, "w2", 3, time.Minute))
		yes, no := true, false
		g := ok(e.s.SetGroupSettings(ctx, "one", storage.GroupSettings{MaxActive: 10, SameWorker: &yes}))(t)
		if !g.SameWorker || len(g.Require) != 0 {
			t.Fatalf("group: same %v, require %v", g.SameWorker, g.Require)
		}
		ok(e.s.SetGroup(ctx, "plain", "wait", 10))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "one", ID: "a", Slots: 3}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "one", ID: "b", Slots: 2}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "plain", ID: "c", Slots: 2, SameWorker: true}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "plain", ID: "d", Slots: 2}))(t)
		if r := ok(e.s.GetRun(ctx, "c"))(t); !r.SameWorker || len(r.Require) != 0 {
			t.Fatalf("run c: same %v, require %v", r.SameWorker, r.Require)
		}
		// a (3 slots) passes w1's 2 and takes w2's 3; b (2) then takes w1's
		if r := launch(t, e, f, "one", "a", "b"); r.Queued != 0 {
			t.Fatalf("one: queued %d, want 0", r.Queued)
		}
		if ws := workerOf(t, e, "a"); fmt.Sprint(ws) != "[w2 w2 w2]" {
			t.Fatalf("a on %v, want w2 only", ws)
		}
		if ws := workerOf(t, e, "b"); fmt.Sprint(ws) != "[w1 w1]" {
			t.Fatalf("b on %v, want w1 only", ws)
		}
		// no slot free: c queues; a finishes, freeing w2's 3
		launch(t, e, f, "plain", "c", "d")
		a := ok(e.s.GetRun(ctx, "a"))(t)
		mustNil(t, e.s.Report(ctx, a.Assignments[0].Worker, "a", a.Assignments[0].Token, storage.StateSucceeded, "done"))
		b := ok(e.s.GetRun(ctx, "b"))(t)
		mustNil(t, e.s.Report(ctx, b.Assignments[0].Worker, "b", b.Assignments[0].Token, storage.StateSucceeded, "done"))
		// free now: w1#0 w1#1 w2#0 w2#1 w2#2; c takes one worker's two
		res := ok(e.s.AllocateBatch(ctx, f, []string{"c", "d"}))(t)
		if len(res) != 2 || res[0].Outcome != storage.AllocAllocated || res[1].Outcome != storage.AllocAllocated {
			t.Fatalf("allocate: %+v", res)
		}
		if ws := workerOf(t, e, "c"); ws[0] != ws[1] {
			t.Fatalf("c on %v, want one worker", ws)
		}
		// a 3-slot same-worker run with 3 free slots on two workers waits,
		// never held, and a smaller run after it takes a slot
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "one", ID: "big", Slots: 3}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "plain", ID: "small", Slots: 1}))(t)
		launch(t, e, f, "one", "big")
		launch(t, e, f, "plain", "small")
		if free := ok(e.s.FreeSlots(ctx))(t); free != 1 && free != 0 {
			t.Fatalf("free %d", free)
		}
		res = ok(e.s.AllocatePass(ctx, f, []string{"big", "small"}, 0, 0, nil))(t)
		if len(res) != 2 || res[0].Outcome != storage.AllocNoSlots || res[0].Held || !res[0].SameWorker || res[0].Found != 1 {
			t.Fatalf("big: %+v, want no_slots (1 free slot found), not held, same worker", res)
		}
		if res[1].Outcome != storage.AllocAllocated {
			t.Fatalf("small: %+v, want allocated past big (guard 0 holds other misfits)", res[1])
		}
		// the flag comes off
		g = ok(e.s.SetGroupSettings(ctx, "one", storage.GroupSettings{SameWorker: &no}))(t)
		if g.SameWorker {
			t.Fatal("SameWorker false left the flag on")
		}
		if g = ok(e.s.GetGroup(ctx, "one"))(t); g.SameWorker {
			t.Fatal("the group read still has the flag")
		}
	})
}

// TestStore_prefer: a group's preferences and a run's own (a key in both:
// the run's) put a launch on a worker that carries them, the highest sum of
// weights first, in the apply and in the allocate calls; they are soft: a
// run whose preferred workers are full, or that prefers a label no worker
// has, takes other slots, and a run with only preferences is held by the
// slot guard as any run. They read back on the group and run records, not
// among the requirements, and are part of the idempotency fingerprint.
func TestStore_prefer(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "plain", 2, time.Minute))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "eu", 2, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("region", "eu")}}))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "eu-ssd", 1, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("disk", "ssd"), label("region", "eu")}}))
		mustNil(t, e.s.RegisterWorkerWith(ctx, "us", 2, time.Minute, storage.WorkerPlacement{Labels: []abi.Label{label("region", "us")}}))
		pref := func(k, v string, w uint32) abi.Preference { return abi.Preference{Key: k, Value: v, Weight: w} }
		g := ok(e.s.SetGroupSettings(ctx, "web", storage.GroupSettings{MaxActive: 20, Prefer: []abi.Preference{pref("region", "eu", 10)}}))(t)
		if fmt.Sprint(g.Prefer) != "[{region eu 10}]" || g.Require != nil {
			t.Fatalf("group: prefer %v, require %v", g.Prefer, g.Require)
		}
		if g := ok(e.s.GetGroup(ctx, "web"))(t); fmt.Sprint(g.Prefer) != "[{region eu 10}]" {
			t.Fatalf("group reads back prefer %v", g.Prefer)
		}
		subs := map[string][]abi.Preference{
			"ssd": {pref("disk", "ssd", 5)},   // eu-ssd scores 15, eu 10
			"us":  {pref("region", "us", 20)}, // the run's value wins: us
			"e1":  nil, "e2": nil, "e3": nil,  // eu-ssd is taken: eu, eu, then any
			"ap": {pref("region", "ap", 1000)}, // nobody: as without
		}
		for id, ps := range subs {
			r := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "web", ID: id, Prefer: ps}))(t)
			if fmt.Sprint(r.Prefer) != fmt.Sprint(ps) || r.Require != nil {
				t.Fatalf("%s: submitted with %v, record says %v (require %v)", id, ps, r.Prefer, r.Require)
			}
		}
		if got := ok(e.s.GetRun(ctx, "ssd"))(t); fmt.Sprint(got.Prefer) != "[{disk ssd 5}]" || got.Require != nil {
			t.Fatalf("run ssd reads back prefer %v, require %v", got.Prefer, got.Require)
		}
		if r := launch(t, e, f, "web", "ssd", "us", "e1", "e2"); r.Queued != 0 {
			t.Fatalf("queued %d, want 0", r.Queued)
		}
		for id, w := range map[string]string{"ssd": "eu-ssd", "us": "us", "e1": "eu", "e2": "eu"} {
			if ws := workerOf(t, e, id); fmt.Sprint(ws) != "["+w+"]" {
				t.Fatalf("%s on %v, want %s", id, ws, w)
			}
		}
		// eu and eu-ssd are full: e3 takes another slot (plain's first:
		// an open worker before a labelled one), ap too
		if r := launch(t, e, f, "web", "e3", "ap"); r.Queued != 0 {
			t.Fatalf("queued %d, want 0", r.Queued)
		}
		if ws := workerOf(t, e, "e3"); fmt.Sprint(ws) != "[plain]" {
			t.Fatalf("e3 on %v, want plain", ws)
		}
		// the allocate call honours them: with every slot taken q1
		// queues; e1 (on eu) and e3 (on plain) finish, and q1 takes eu's
		// slot, where a run without preferences takes plain's first
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "web", ID: "fill"}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "web", ID: "q1"}))(t)
		if r := launch(t, e, f, "web", "fill", "q1"); r.Queued != 1 {
			t.Fatalf("fill, q1 queued %d, want 1", r.Queued)
		}
		for _, id := range []string{"e1", "e3"} {
			r := ok(e.s.GetRun(ctx, id))(t)
			mustNil(t, e.s.Report(ctx, r.Assignments[0].Worker, id, r.Assignments[0].Token, storage.StateSucceeded, "done"))
		}
		res := ok(e.s.AllocateBatch(ctx, f, []string{"q1"}))(t)
		if len(res) != 1 || res[0].Outcome != storage.AllocAllocated {
			t.Fatalf("allocate q1: %+v", res)
		}
		if ws := workerOf(t, e, "q1"); fmt.Sprint(ws) != "[eu]" {
			t.Fatalf("q1 on %v, want eu (preferred, freed by e1)", ws)
		}
		// soft: a run with only preferences that does not fit is held by
		// the guard (0 here) as any run, where a requirement never is
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "web", ID: "big", Slots: 5}))(t)
		launch(t, e, f, "web", "big")
		res = ok(e.s.AllocatePass(ctx, f, []string{"big"}, 0, 0, nil))(t)
		if len(res) != 1 || res[0].Outcome != storage.AllocNoSlots || !res[0].Held || res[0].Require != nil {
			t.Fatalf("big: %+v, want no_slots, held, no requirements", res)
		}
		// the fingerprint: same key, other preferences is another request
		req := storage.SubmitRequest{Group: "web", IdempotencyKey: "k1", Prefer: []abi.Preference{pref("region", "eu", 1)}}
		ok(e.s.Submit(ctx, req))(t)
		req.Prefer = []abi.Preference{pref("region", "eu", 2)}
		if _, err := e.s.Submit(ctx, req); !errors.Is(err, storage.ErrConflict) {
			t.Fatalf("same key, other preferences: %v, want ErrConflict", err)
		}
		// bad input: nothing written
		for name, ps := range map[string][]abi.Preference{"weight": {pref("region", "eu", 0)}, "key": {pref("Region", "eu", 1)},
			"twice": {pref("a", "1", 1), pref("a", "2", 1)}} {
			t.Run(name, func(t *testing.T) {
				e.unchanged(t, func() {
					if _, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "web", Prefer: ps}); !errors.Is(err, storage.ErrInvalid) {
						t.Fatalf("submit: %v, want ErrInvalid", err)
					}
					if _, err := e.s.SetGroupSettings(ctx, "web", storage.GroupSettings{Prefer: ps}); !errors.Is(err, storage.ErrInvalid) {
						t.Fatalf("group: %v, want ErrInvalid", err)
					}
				})
			})
		}
		if g := ok(e.s.SetGroupSettings(ctx, "web", storage.GroupSettings{Prefer: []abi.Preference{}}))(t); g.Prefer != nil {
			t.Fatalf("prefer after clearing: %v", g.Prefer)
		}
	})
}

// TestStore_preferWindows: the preferred worker's free slots lie past the
// first window of the labelled free slots the scripts read (64): a run
// still finds it, and a run preferring two labels takes the worker that
// carries both over one read first that carries one.
func TestStore_preferWindows(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		reg := func(w string, slots int, ls ...abi.Label) {
			mustNil(t, e.s.RegisterWorkerWith(ctx, w, slots, time.Minute, storage.WorkerPlacement{Labels: ls}))
		}
		reg("a-us", 70, label("region", "us"))
		reg("m-eu", 2, label("region", "eu"))
		reg("z-eu-ssd", 2, label("disk", "ssd"), label("region", "eu"))
		ok(e.s.SetGroup(ctx, "g", "wait", 10))(t)
		pref := func(k, v string, w uint32) abi.Preference { return abi.Preference{Key: k, Value: v, Weight: w} }
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "eu", Prefer: []abi.Preference{pref("region", "eu", 1)}}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "both", Prefer: []abi.Preference{pref("disk", "ssd", 1), pref("region", "eu", 1)}}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "us", Prefer: []abi.Preference{pref("region", "us", 1)}}))(t)
		if r := launch(t, e, f, "g", "eu", "both", "us"); r.Queued != 0 {
			t.Fatalf("queued %d", r.Queued)
		}
		for id, w := range map[string]string{"eu": "m-eu", "both": "z-eu-ssd", "us": "a-us"} {
			if ws := workerOf(t, e, id); fmt.Sprint(ws) != "["+w+"]" {
				t.Fatalf("%s on %v, want %s", id, ws, w)
			}
		}
	})
}
