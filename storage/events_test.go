package storage_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

func TestParseRunEvents(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []storage.RunEvent
	}{
		{"empty", "", nil},
		{"one", "WAITING#g#r1", []storage.RunEvent{{Run: "r1", Group: "g", State: storage.StateWaiting}}},
		{"several", "LAUNCHED#g#a DISCARDED#g#b", []storage.RunEvent{
			{Run: "a", Group: "g", State: storage.StateLaunched}, {Run: "b", Group: "g", State: storage.StateDiscarded}}},
		{"id with colon", "RUNNING#g:1#r:2", []storage.RunEvent{{Run: "r:2", Group: "g:1", State: storage.StateRunning}}},
		{"malformed skipped", "x #g#r WAITING##r WAITING#g# WAITING#g#ok", []storage.RunEvent{{Run: "ok", Group: "g", State: storage.StateWaiting}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storage.ParseRunEvents(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseRunEvents(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestStore_WatchRuns: every script that changes a run's state announces
// it, in commit order, on both backends.
func TestStore_WatchRuns(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		w, err := e.s.WatchRuns(ctx)
		mustNil(t, err)
		defer w.Close()
		var got []string
		next := func(n int) {
			t.Helper()
			deadline := time.After(5 * time.Second)
			for len(got) < n {
				select {
				case b, ok := <-w.C:
					if !ok {
						t.Fatal("watch closed")
					}
					if b.Missed {
						t.Fatalf("missed events after %v", got)
					}
					for _, ev := range b.Events {
						got = append(got, fmt.Sprintf("%s:%s:%s", ev.Run, ev.Group, ev.State))
					}
				case <-deadline:
					t.Fatalf("events so far %v, want %d", got, n)
				}
			}
		}
		f := e.lead(t, "L#1#a")
		ok(e.s.SetGroup(ctx, "g", "wait", 10))(t)
		for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: id}))(t)
		}
		next(6)
		v := ok(e.s.GetGroup(ctx, "g"))(t).Version
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c1", Actions: []storage.Action{
			{Kind: storage.ActionLaunch, Run: "a"}, {Kind: storage.ActionLaunch, Run: "b"}, {Kind: storage.ActionDiscard, Run: "c"}}}))(t)
		next(9)
		mustNil(t, e.s.RegisterWorker(ctx, "wA", 2, time.Minute))
		as := storagetest.AllocateOne(t, ctx, e.s, f, "a")
		next(10)
		mustNil(t, e.s.Report(ctx, "wA", "a", as[0].Token, storage.StateSucceeded, "ok"))
		next(11)
		storagetest.AllocateOne(t, ctx, e.s, f, "b")
		next(12)
		mustNil(t, e.s.FailRun(ctx, f, "b", "lost"))
		next(13)
		ok(e.s.RequestStop(ctx, "d", "operator"))(t)
		next(14)
		v = ok(e.s.GetGroup(ctx, "g"))(t).Version
		ok(e.s.Apply(ctx, f, "g", storage.Decision{Version: v, ClaimID: "c2", Below: 6, BelowReason: "newer"}))(t)
		for {
			_, more, err := e.s.Drain(ctx, f, "g", 1)
			mustNil(t, err)
			if !more {
				break
			}
		}
		next(15)
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "h", ID: "h1"}))(t)
		ok(e.s.DeleteGroup(ctx, "h", true, "gone"))(t)
		next(17)
		want := []string{
			"a:g:WAITING", "b:g:WAITING", "c:g:WAITING", "d:g:WAITING", "e:g:WAITING", "f:g:WAITING",
			"a:g:LAUNCHED", "b:g:LAUNCHED", "c:g:DISCARDED",
			"a:g:RUNNING", "a:g:SUCCEEDED", "b:g:RUNNING", "b:g:FAILED",
			"d:g:DISCARDED", "e:g:DISCARDED",
			"h1:h:WAITING", "h1:h:DISCARDED",
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("events\n got %v\nwant %v", got, want)
		}
		// Close ends the channel.
		mustNil(t, w.Close())
		for range w.C {
		}
	})
}

// TestStore_WatchRuns_slowReader: a reader that does not read costs at
// most RunWatchBuffer batches; the first batch after the gap says Missed.
func TestStore_WatchRuns_slowReader(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		w, err := e.s.WatchRuns(ctx)
		mustNil(t, err)
		defer w.Close()
		n := storage.RunWatchBuffer + 50
		for i := 0; i < n; i++ {
			ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%d", i)}))(t)
		}
		// wait until the watcher has seen them all (the buffer is full)
		deadline := time.Now().Add(5 * time.Second)
		for len(w.C) < storage.RunWatchBuffer && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if got := len(w.C); got != storage.RunWatchBuffer {
			t.Fatalf("buffered %d batches, want %d", got, storage.RunWatchBuffer)
		}
		for i := 0; i < storage.RunWatchBuffer; i++ {
			if b := <-w.C; b.Missed {
				t.Fatalf("batch %d marked missed", i)
			}
		}
		ok(e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "last"}))(t)
		select {
		case b := <-w.C:
			if !b.Missed || len(b.Events) != 1 || b.Events[0].Run != "last" {
				t.Fatalf("after the gap: %+v", b)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no batch after the gap")
		}
	})
}

// TestStore_WatchRuns_cancel: cancelling the watch's context ends it (C
// is closed) without a message arriving.
func TestStore_WatchRuns_cancel(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		wctx, cancel := context.WithCancel(ctx)
		w, err := e.s.WatchRuns(wctx)
		mustNil(t, err)
		cancel()
		select {
		case _, ok := <-w.C:
			if ok {
				t.Fatal("a batch after cancel")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the watch did not end on cancel")
		}
		mustNil(t, w.Close())
	})
}

// TestStore_WatchRuns_redisRestart: when redis-server restarts under a
// watch, the watch reconnects by itself and its first batch afterwards
// says Missed (what was published meanwhile is lost): a watcher knows to
// re-read.
func TestStore_WatchRuns_redisRestart(t *testing.T) {
	srv := redistest.Start(t)
	s, err := storage.New(srv.Client(t), "restart")
	mustNil(t, err)
	w, err := s.WatchRuns(ctx)
	mustNil(t, err)
	defer w.Close()
	srv.Restart(t)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no batch after the restart")
		}
		if _, err := s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: fmt.Sprintf("r%d", i)}); err != nil {
			time.Sleep(50 * time.Millisecond) // the store's own client reconnects too
			continue
		}
		select {
		case b := <-w.C:
			if !b.Missed {
				t.Fatalf("first batch after a restart: %+v, want Missed", b)
			}
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestWorkRef_View: a view of a truncated window (oldest 1 2, newest 8 9
// of 9 waiting, window 2) takes the reference's runs into the parts they
// shift into, and refuses runs that do not fill the gap as the window
// rule does.
func TestWorkRef_View(t *testing.T) {
	runs := func(seqs ...int64) []storage.Run {
		out := []storage.Run{}
		for _, s := range seqs {
			out = append(out, storage.Run{ID: fmt.Sprint("r", s), Seq: s})
		}
		return out
	}
	sn := storage.Snapshot{Group: storage.Group{Name: "g", Version: 4}, WaitingTotal: 9, WaitingOldest: 2,
		Waiting: runs(1, 2, 8, 9)}
	for _, tc := range []struct {
		name       string
		taken      []string
		gap        []storage.Run
		ok         bool
		want       []int64
		oldest     int
		gapO, gapN int
	}{
		{name: "oldest", taken: []string{"r1"}, gap: runs(3), ok: true, want: []int64{2, 3, 8, 9}, oldest: 2, gapO: 1},
		{name: "newest", taken: []string{"r9"}, gap: runs(7), ok: true, want: []int64{1, 2, 7, 8}, oldest: 2, gapN: 1},
		{name: "both", taken: []string{"r1", "r9"}, gap: runs(3, 7), ok: true, want: []int64{2, 3, 7, 8}, oldest: 2, gapO: 1, gapN: 1},
		{name: "too few", taken: []string{"r1", "r9"}, gap: runs(3), gapO: 1, gapN: 1},
		{name: "none", taken: []string{"r1"}, gapO: 1},
		{name: "outside the gap", taken: []string{"r1"}, gap: runs(8), gapO: 1},
		{name: "out of order", taken: []string{"r1", "r9"}, gap: runs(7, 3), gapO: 1, gapN: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[string]bool{}
			for _, id := range tc.taken {
				taken[id] = true
			}
			v, gap, ok := storage.LeaveView(sn, taken)
			if !ok || gap.Lo != 2 || gap.Hi != 8 || gap.Oldest != tc.gapO || gap.Newest != tc.gapN ||
				v.WaitingTotal != 9-len(tc.taken) {
				t.Fatalf("LeaveView: %v %+v total %d", ok, gap, v.WaitingTotal)
			}
			got, ok := storage.WorkRef{Group: "g", Version: 6, Gap: tc.gap}.View(v, gap)
			if ok != tc.ok {
				t.Fatalf("View ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			var seqs []int64
			for _, r := range got.Waiting {
				seqs = append(seqs, r.Seq)
			}
			if !reflect.DeepEqual(seqs, tc.want) || got.WaitingOldest != tc.oldest || got.Group.Version != 6 || !got.Truncated() {
				t.Fatalf("View: %v oldest %d version %d, want %v oldest %d version 6, truncated", seqs, got.WaitingOldest,
					got.Group.Version, tc.want, tc.oldest)
			}
		})
	}
	if _, _, ok := storage.LeaveView(sn, map[string]bool{"r5": true}); ok {
		t.Fatal("LeaveView of a run not in the window: ok")
	}
}
