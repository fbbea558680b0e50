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
