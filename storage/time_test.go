package storage_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// due moves group g's due delayed runs (one DueBatch) and returns the result.
func due(t *testing.T, e *env, f storage.Fence, g string) storage.DueResult {
	t.Helper()
	r := e.s.DueBatch(ctx, f, []string{g})[0]
	mustNil(t, r.Err)
	return r
}

// runOn launches run id of group g on worker w and returns its token.
func runOn(t *testing.T, e *env, f storage.Fence, g, id string) string {
	t.Helper()
	launch(t, e, f, g, id)
	r := ok(e.s.GetRun(ctx, id))(t)
	if r.State != storage.StateRunning || len(r.Assignments) == 0 {
		t.Fatalf("run %s = %s, want RUNNING with a slot", id, r.State)
	}
	return r.Assignments[0].Token
}

// TestStore_Submit_notBefore: a run with a not_before ahead waits outside
// its group's queue (no snapshot has it, the group is not dirty or bumped,
// its timer is set); the timer's due script moves it into the queue once
// due by Redis time, with a new seq behind the runs waiting then; a
// not_before in the past is now.
func TestStore_Submit_notBefore(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroup(ctx, "g", "wait", 1))(t)
		mustNil(t, e.c.Del(ctx, keyspace.Of(e.s).Dirty()).Err())
		v0 := ok(e.s.GetGroup(ctx, "g"))(t).Version
		at := time.Now().Add(400 * time.Millisecond)
		d := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "later", NotBefore: at}))(t)
		if d.State != storage.StateWaiting || d.NotBefore.UnixMilli() != at.UnixMilli() {
			t.Fatalf("submitted %+v: want WAITING with its not_before", d)
		}
		g := ok(e.s.GetGroup(ctx, "g"))(t)
		if g.Waiting != 0 || g.Delayed != 1 || g.Version != v0 {
			t.Fatalf("group %+v: want 0 waiting, 1 delayed, version %d kept", g, v0)
		}
		if n := e.c.SCard(ctx, keyspace.Of(e.s).Dirty()).Val(); n != 0 {
			t.Fatalf("dirty has %d groups after a delayed submit, want 0", n)
		}
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		if len(sn.Waiting) != 0 {
			t.Fatalf("snapshot has %d waiting runs, want none (the delayed run is not due)", len(sn.Waiting))
		}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "past", NotBefore: time.Now().Add(-time.Hour)}))(t)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "now"}))(t)
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Waiting != 2 || g.Delayed != 1 {
			t.Fatalf("group %+v: a not_before in the past is now: want 2 waiting, 1 delayed", g)
		}
		ts := ok(e.s.Timers(ctx, 10))(t)
		if len(ts.Groups) != 0 || ts.NextGroup.UnixMilli() != at.UnixMilli() {
			t.Fatalf("timers %+v: want none due, the next at %v", ts, at)
		}
		if r := due(t, e, f, "g"); r.Moved != 0 || r.Next.UnixMilli() != at.UnixMilli() {
			t.Fatalf("due before its time = %+v, want nothing moved", r)
		}
		time.Sleep(time.Until(at) + 50*time.Millisecond)
		ts = ok(e.s.Timers(ctx, 10))(t)
		if len(ts.Groups) != 1 || ts.Groups[0] != "g" {
			t.Fatalf("timers %+v: want g due", ts)
		}
		if r := due(t, e, f, "g"); r.Moved != 1 || !r.Next.IsZero() {
			t.Fatalf("due = %+v, want 1 moved and no timer left", r)
		}
		if ts := ok(e.s.Timers(ctx, 10))(t); len(ts.Groups) != 0 || !ts.NextGroup.IsZero() {
			t.Fatalf("timers after due = %+v, want empty", ts)
		}
		sn = ok(e.s.Snapshot(ctx, "g"))(t)
		var ids []string
		for _, w := range sn.Waiting {
			ids = append(ids, w.ID)
		}
		if strings.Join(ids, ",") != "past,now,later" {
			t.Fatalf("queue %v: want the due run behind the runs waiting when it became due", ids)
		}
		if n := e.c.SIsMember(ctx, keyspace.Of(e.s).Dirty(), "g").Val(); !n {
			t.Fatal("the group is not dirty after a run became due")
		}
		if r := ok(e.s.GetRun(ctx, "later"))(t); r.Seq <= ok(e.s.GetRun(ctx, "now"))(t).Seq {
			t.Fatalf("due run seq %d: want a new seq after the waiting runs'", r.Seq)
		}
	})
}

// TestStore_Submit_timeBounds: bad time settings are ErrInvalid naming
// the field, and nothing is written.
func TestStore_Submit_timeBounds(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		for _, c := range []struct {
			name string
			req  storage.SubmitRequest
			want string
		}{
			{"not_before beyond a year", storage.SubmitRequest{NotBefore: time.Now().Add(limits.MaxNotBefore + time.Hour)}, "not_before"},
			{"negative timeout", storage.SubmitRequest{Timeout: -time.Second}, "timeout"},
			{"timeout beyond the bound", storage.SubmitRequest{Timeout: limits.MaxTimeout + time.Hour}, "timeout"},
			{"max attempts 101", storage.SubmitRequest{Retry: storage.Retry{MaxAttempts: 101}}, "max attempts"},
			{"negative max attempts", storage.SubmitRequest{Retry: storage.Retry{MaxAttempts: -1}}, "max attempts"},
			{"backoff above cap", storage.SubmitRequest{Retry: storage.Retry{MaxAttempts: 3, Base: time.Minute, Cap: time.Second}}, "cap"},
			{"negative backoff", storage.SubmitRequest{Retry: storage.Retry{MaxAttempts: 3, Base: -time.Second}}, "backoff"},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.req.Group, c.req.ID = "g", "bad"
				_, err := e.s.Submit(ctx, c.req)
				if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want ErrInvalid naming %q", err, c.want)
				}
				if n := e.c.Exists(ctx, keyspace.Of(e.s).Run("bad"), keyspace.Of(e.s).Group("g")).Val(); n != 0 {
					t.Fatalf("%d keys written by a refused submit", n)
				}
			})
		}
	})
}

// TestStore_Report_retries: a FAILED attempt of a run with attempts left
// returns it to WAITING under its id (attempt+1, parked until its backoff
// is over, its slot freed, not finished); each attempt is recorded; the
// last attempt's failure is final; a STOPPED run is never retried; a
// leader's FailRun retries as a report does.
func TestStore_Report_retries(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		ok(e.s.SetGroup(ctx, "g", "wait", 5))(t)
		retry := storage.Retry{MaxAttempts: 3, Base: 100 * time.Millisecond, Cap: 150 * time.Millisecond}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r", Retry: retry}))(t)
		for att := 1; att <= 3; att++ {
			tok := runOn(t, e, f, "g", "r")
			mustNil(t, e.s.Report(ctx, "wA", "r", tok, storage.StateFailed, "exit status 7"))
			r := ok(e.s.GetRun(ctx, "r"))(t)
			if len(r.Attempts) != att || r.Attempts[att-1].N != att || r.Attempts[att-1].Outcome != storage.StateFailed ||
				r.Attempts[att-1].Worker != "wA" || r.Attempts[att-1].Reason != "exit status 7" {
				t.Fatalf("attempt %d: attempts %+v", att, r.Attempts)
			}
			if att == 3 {
				if r.State != storage.StateFailed || r.FinishedAt.IsZero() {
					t.Fatalf("after the last attempt: %s, want FAILED", r.State)
				}
				break
			}
			if r.State != storage.StateWaiting || r.Attempt != att+1 || r.MaxAttempts != 3 || len(r.Assignments) != 0 || !r.FinishedAt.IsZero() {
				t.Fatalf("after attempt %d: %+v, want WAITING attempt %d, no slots, not finished", att, r, att+1)
			}
			// Redis times both: attempt n+1 is due min(cap, base·2^(n-1)),
			// half fixed, half jitter, after attempt n finished.
			d := min(retry.Base<<(att-1), retry.Cap)
			if wait := r.NotBefore.Sub(r.Attempts[att-1].FinishedAt); wait < d/2 || wait > d {
				t.Fatalf("retry due %v after the failure, want %v..%v", wait, d/2, d)
			}
			if !strings.Contains(r.Reason, "attempt ") || !strings.Contains(r.Reason, "exit status 7") {
				t.Fatalf("reason %q: want the failed attempt named", r.Reason)
			}
			if n := e.c.ZCard(ctx, keyspace.Of(e.s).Finished("g")).Val(); n != 0 {
				t.Fatalf("a retried run is in the finished index (%d)", n)
			}
			if free := e.c.ZCard(ctx, keyspace.Of(e.s).Free()).Val(); free != 2 {
				t.Fatalf("%d free slots after the failed attempt, want 2", free)
			}
			if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Delayed != 1 || g.Active != 0 {
				t.Fatalf("group %+v: want the run delayed, none active", g)
			}
			time.Sleep(time.Until(r.NotBefore) + 20*time.Millisecond)
			if d := due(t, e, f, "g"); d.Moved != 1 {
				t.Fatalf("due = %+v, want the retry moved", d)
			}
		}
		// STOPPED: never retried.
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "s", Retry: retry}))(t)
		tok := runOn(t, e, f, "g", "s")
		mustNil(t, e.s.Report(ctx, "wA", "s", tok, storage.StateStopped, "stopped"))
		if r := ok(e.s.GetRun(ctx, "s"))(t); r.State != storage.StateStopped {
			t.Fatalf("stopped run = %s, want STOPPED (never retried)", r.State)
		}
		// The leader's fail retries too.
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "l", Retry: retry}))(t)
		runOn(t, e, f, "g", "l")
		mustNil(t, e.s.FailRun(ctx, f, "l", "worker lost"))
		r := ok(e.s.GetRun(ctx, "l"))(t)
		if r.State != storage.StateWaiting || r.Attempt != 2 || len(r.Attempts) != 1 || r.Attempts[0].Worker != "wA" {
			t.Fatalf("failed by the leader: %+v, want WAITING attempt 2 with attempt 1 recorded", r)
		}
		// A run without retries fails for good and records no attempts.
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "once"}))(t)
		tok = runOn(t, e, f, "g", "once")
		mustNil(t, e.s.Report(ctx, "wA", "once", tok, storage.StateFailed, "boom"))
		if r := ok(e.s.GetRun(ctx, "once"))(t); r.State != storage.StateFailed || r.Attempt != 1 || r.MaxAttempts != 1 || len(r.Attempts) != 0 {
			t.Fatalf("run without retries = %+v", r)
		}
	})
}

// TestStore_GroupRunDefaults: a group's run timeout and retry policy
// apply to the runs submitted afterwards without their own; a run's own
// settings win; clearing them stops applying them.
func TestStore_GroupRunDefaults(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		to := 20 * time.Minute
		g := ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{RunTimeout: &to,
			Retry: &storage.Retry{MaxAttempts: 4, Base: time.Second, Cap: time.Minute}}))(t)
		if g.RunTimeout != to || g.Retry.MaxAttempts != 4 || g.Retry.Base != time.Second || g.Retry.Cap != time.Minute {
			t.Fatalf("group %+v", g)
		}
		a := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "a"}))(t)
		if a.Timeout != to || a.MaxAttempts != 4 {
			t.Fatalf("submitted %+v: want the group's defaults", a)
		}
		ra := ok(e.s.GetRun(ctx, "a"))(t)
		if ra.Timeout != to || ra.MaxAttempts != 4 || ra.RetryBase != time.Second || ra.RetryCap != time.Minute {
			t.Fatalf("run a %+v: want the group's defaults", ra)
		}
		b := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "b", Timeout: time.Second, Retry: storage.Retry{MaxAttempts: 2}}))(t)
		if rb := ok(e.s.GetRun(ctx, "b"))(t); b.Timeout != time.Second || rb.MaxAttempts != 2 || rb.RetryBase != time.Second {
			t.Fatalf("run b %+v: want its own timeout and attempts (the group's backoff)", rb)
		}
		zero := time.Duration(0)
		ok(e.s.SetGroupSettings(ctx, "g", storage.GroupSettings{RunTimeout: &zero, Retry: &storage.Retry{}}))(t)
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.RunTimeout != 0 || g.Retry != (storage.Retry{}) {
			t.Fatalf("cleared group %+v", g)
		}
		if c := ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "c"}))(t); c.Timeout != 0 || c.MaxAttempts != 1 {
			t.Fatalf("run c %+v: want no timeout, one attempt", c)
		}
	})
}

// TestStore_DeleteGroup_delayed: a group's delayed runs count as waiting:
// delete refuses them without force and discards them with it, and the
// group's timer goes with the group.
func TestStore_DeleteGroup_delayed(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "d", NotBefore: time.Now().Add(time.Hour)}))(t)
		if _, err := e.s.DeleteGroup(ctx, "g", false, ""); !errors.Is(err, storage.ErrBadState) {
			t.Fatalf("delete without force = %v, want ErrBadState", err)
		}
		if n := ok(e.s.DeleteGroup(ctx, "g", true, "gone"))(t); n != 1 {
			t.Fatalf("discarded %d, want 1", n)
		}
		if r := ok(e.s.GetRun(ctx, "d"))(t); r.State != storage.StateDiscarded {
			t.Fatalf("delayed run = %s, want DISCARDED", r.State)
		}
		if n := e.c.Exists(ctx, keyspace.Of(e.s).Delayed("g")).Val() + e.c.ZCard(ctx, keyspace.Of(e.s).Timers()).Val(); n != 0 {
			t.Fatal("the deleted group's delayed zset or timer is left")
		}
	})
}

// TestStore_Schedules: set, read, pause, resume, delete; a fire submits
// the tick's run once (a second fire of the same tick is stale, a fire of
// a tick whose run exists is not submitted again), moves the schedule to
// its next tick and counts the missed ticks; a deposed leader's fire is
// fenced; bad specs are ErrInvalid with nothing written.
func TestStore_Schedules(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		sc := ok(e.s.SetSchedule(ctx, storage.Schedule{Name: "s", Group: "g", Cron: "@every 1s", Payload: "p", Priority: 3,
			Timeout: time.Minute, Retry: storage.Retry{MaxAttempts: 2}}))(t)
		if sc.Next.IsZero() || sc.Next.UnixMilli()%1000 != 0 || time.Until(sc.Next) > time.Second {
			t.Fatalf("next %v: want the next whole second", sc.Next)
		}
		// Fire as if two more ticks had passed since: the latest is
		// submitted, one is missed.
		now := sc.Next.Add(2*time.Second + 100*time.Millisecond)
		res := e.s.FireSchedules(ctx, f, []string{"s"}, now)[0]
		mustNil(t, res.Err)
		if res.Outcome != "submitted" || res.Missed != 2 || !res.Tick.Equal(sc.Next.Add(2*time.Second)) {
			t.Fatalf("fire = %+v, want the latest tick submitted, 2 missed", res)
		}
		id := storage.ScheduleRunID("s", res.Tick)
		r := ok(e.s.GetRun(ctx, id))(t)
		if r.Group != "g" || r.Payload != "p" || r.Priority != 3 || r.Timeout != time.Minute || r.MaxAttempts != 2 || r.Schedule != "s" {
			t.Fatalf("scheduled run %+v", r)
		}
		got := ok(e.s.GetSchedule(ctx, "s"))(t)
		if got.Submitted != 1 || got.Missed != 2 || got.LastRun != id || !got.Next.Equal(sc.Next.Add(3*time.Second)) {
			t.Fatalf("schedule after fire %+v", got)
		}
		// Fired again at the same now (a late pass): its next tick is not
		// due, nothing is submitted.
		e2 := e.s.FireSchedules(ctx, f, []string{"s"}, now)[0]
		if e2.Err != nil || e2.Outcome != "stale" {
			t.Fatalf("second fire = %+v, want stale", e2)
		}
		if n := e.c.ZCard(ctx, keyspace.Of(e.s).Runs()).Val(); n != 1 {
			t.Fatalf("%d runs after two fires of one tick, want 1", n)
		}
		mustNil(t, e.s.PauseSchedule(ctx, "s"))
		if got := ok(e.s.GetSchedule(ctx, "s"))(t); !got.Paused || !got.Next.IsZero() {
			t.Fatalf("paused %+v", got)
		}
		if ts := ok(e.s.Timers(ctx, 10))(t); len(ts.Schedules) != 0 || !ts.NextSchedule.IsZero() {
			t.Fatalf("a paused schedule is in the timers: %+v", ts)
		}
		got = ok(e.s.ResumeSchedule(ctx, "s"))(t)
		if got.Paused || got.Next.IsZero() || got.Submitted != 1 {
			t.Fatalf("resumed %+v", got)
		}
		// Fenced: a deposed leader fires nothing.
		e.lead(t, "L#2#b")
		if x := e.s.FireSchedules(ctx, f, []string{"s"}, time.Now().Add(time.Hour))[0]; !errors.Is(x.Err, storage.ErrFenced) {
			t.Fatalf("deposed fire = %+v, want ErrFenced", x)
		}
		if l := ok(e.s.ListSchedules(ctx))(t); len(l) != 1 || l[0].Name != "s" {
			t.Fatalf("list = %+v", l)
		}
		mustNil(t, e.s.DeleteSchedule(ctx, "s"))
		if _, err := e.s.GetSchedule(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("deleted schedule: %v", err)
		}
		if err := e.s.PauseSchedule(ctx, "s"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("pause of a deleted schedule: %v", err)
		}
		for _, bad := range []storage.Schedule{
			{Name: "b", Group: "g", Cron: "61 * * * *"},
			{Name: "b", Group: "g", Cron: "* * * *"},
			{Name: "b", Group: "g", Cron: "@every 10ms"},
			{Name: "b", Group: "g", Cron: "@every 1.5s"},
			{Name: "b", Group: "g", Cron: "@hourly", TZ: "Mars/Base"},
			{Name: "b", Group: "g", Cron: "CRON_TZ=UTC @hourly"},
			{Name: "b", Group: "g", Cron: "@hourly" + strings.Repeat(" ", storage.MaxCronLen)},
			{Name: "b", Group: "g", Cron: "@hourly", TZ: strings.Repeat("x", storage.MaxTZLen+1)},
			{Name: "b", Group: "", Cron: "@hourly"},
			{Name: strings.Repeat("n", limits.MaxScheduleName+1), Group: "g", Cron: "@hourly"},
			{Name: "b", Group: "g", Cron: "@hourly", Retry: storage.Retry{MaxAttempts: 101}},
		} {
			if _, err := e.s.SetSchedule(ctx, bad); !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("SetSchedule(%+v) = %v, want ErrInvalid", bad, err)
			}
		}
		if n := e.c.SCard(ctx, keyspace.Of(e.s).ScheduleNames()).Val(); n != 0 {
			t.Fatalf("%d schedules written by refused specs", n)
		}
	})
}

// TestScheduleTicks: the missed-tick rule: of the ticks at or before now,
// the latest is submitted and the others are counted; the next tick is
// the first after now; a cron expression in a zone ticks in that zone.
func TestScheduleTicks(t *testing.T) {
	every := ok(storage.ParseCron("@every 1m", ""))(t)
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		s          cron.Schedule
		due, now   time.Time
		fire, next time.Time
		missed     int64
	}{
		{"on time", every, t0, t0.Add(time.Second), t0, t0.Add(time.Minute), 0},
		{"three missed", every, t0, t0.Add(3*time.Minute + time.Second), t0.Add(3 * time.Minute), t0.Add(4 * time.Minute), 3},
		{"a day missed", every, t0, t0.Add(24*time.Hour + time.Second), t0.Add(24 * time.Hour), t0.Add(24*time.Hour + time.Minute), 1440},
	} {
		t.Run(c.name, func(t *testing.T) {
			fire, missed, next := storage.ScheduleTicks(c.s, c.due, c.now)
			if !fire.Equal(c.fire) || missed != c.missed || !next.Equal(c.next) {
				t.Fatalf("ticks = %v, %d, %v; want %v, %d, %v", fire, missed, next, c.fire, c.missed, c.next)
			}
		})
	}
	paris := ok(storage.ParseCron("0 2 * * *", "Europe/Paris"))(t)
	n := paris.Next(t0)
	if got := n.In(time.UTC); got.Hour() != 1 {
		t.Fatalf("02:00 Paris in January = %v UTC, want 01:00", got)
	}
}

// TestStore_Due_chunks: a group with more due runs than DueChunk is
// moved a chunk per due script, oldest not_before first, its timer kept
// at now until the last chunk; a run stopped while delayed is DISCARDED
// and leaves the delayed runs at once.
func TestStore_Due_chunks(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		n := storage.DueChunk + 44
		at := time.Now().Add(2 * time.Second) // every run still delayed once submitted, also under -race
		var reqs []storage.SubmitRequest
		for i := range n {
			// the later ids are due first: not_before decides, not the seq
			reqs = append(reqs, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%04d", i), NotBefore: at.Add(time.Duration(n-i) * time.Millisecond)})
		}
		for _, r := range e.s.SubmitBatch(ctx, reqs) {
			mustNil(t, r.Err)
		}
		ok(e.s.RequestStop(ctx, "r0000", "not wanted"))(t)
		if g := ok(e.s.GetGroup(ctx, "g"))(t); g.Delayed != n-1 {
			t.Fatalf("%d delayed after a stop, want %d", g.Delayed, n-1)
		}
		time.Sleep(time.Until(at.Add(time.Duration(n+50) * time.Millisecond)))
		r1 := due(t, e, f, "g")
		if r1.Moved != storage.DueChunk || r1.Next.IsZero() || r1.Next.After(time.Now().Add(time.Second)) {
			t.Fatalf("first due = %+v, want a full chunk and the timer at now", r1)
		}
		if ts := ok(e.s.Timers(ctx, 10))(t); len(ts.Groups) != 1 {
			t.Fatalf("timers %+v: want the group still due", ts)
		}
		r2 := due(t, e, f, "g")
		if r2.Moved != n-storage.DueChunk-1 || !r2.Next.IsZero() {
			t.Fatalf("second due = %+v, want the rest (but the discarded run), no timer", r2)
		}
		sn := ok(e.s.Snapshot(ctx, "g"))(t)
		if sn.WaitingTotal != n-1 {
			t.Fatalf("%d waiting, want %d", sn.WaitingTotal, n-1)
		}
		if sn.Waiting[0].ID != fmt.Sprintf("r%04d", n-1) {
			t.Fatalf("first in the queue %s: want the earliest due", sn.Waiting[0].ID)
		}
		if r := ok(e.s.GetRun(ctx, "r0000"))(t); r.State != storage.StateDiscarded {
			t.Fatalf("stopped delayed run = %s", r.State)
		}
	})
}

// TestStore_Report_longReason: a reason of a megabyte (a handler's error
// can be anything) is kept to its first MaxStopReason bytes, on the run
// and in its attempts.
func TestStore_Report_longReason(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		f := e.lead(t, "L#1#a")
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 1, time.Minute))
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r", Retry: storage.Retry{MaxAttempts: 2}}))(t)
		tok := runOn(t, e, f, "g", "r")
		mustNil(t, e.s.Report(ctx, "wA", "r", tok, storage.StateFailed, strings.Repeat("x", 1<<20)))
		r := ok(e.s.GetRun(ctx, "r"))(t)
		if len(r.Reason) > storage.MaxStopReason+64 || len(r.Attempts) != 1 || len(r.Attempts[0].Reason) > storage.MaxStopReason+8 {
			t.Fatalf("reason %d bytes, attempt reason %d bytes: want them cut to %d", len(r.Reason), len(r.Attempts[0].Reason), storage.MaxStopReason)
		}
	})
}
