package storage_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_New(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		for _, ns := range []string{"", "a{b}", "a b"} {
			if _, err := storage.New(e.c, ns); !errors.Is(err, storage.ErrInvalid) {
				t.Errorf("New(%q) = %v, want ErrInvalid", ns, err)
			}
		}
		k := keyspace.Of(e.s)
		for _, key := range []string{k.Fence(), k.Lock(), k.Run("x"), k.Group("g"), k.Slots()} {
			if !strings.HasPrefix(key, "ws:{"+e.s.Namespace()+"}:") {
				t.Errorf("key %q lacks the namespace hash tag", key)
			}
		}
	})
}

func TestStore_Connect(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		c, err := storage.Connect(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	})
	if _, err := storage.Connect(ctx, "redis://127.0.0.1:1/0"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("Connect to a closed port = %v, want an error naming the address", err)
	}
	if _, err := storage.Connect(ctx, "http://x"); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("Connect(bad url) = %v, want ErrInvalid", err)
	}
}

func TestStore_BecomeLeader(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		k := keyspace.Of(e.s)
		// not holder: nothing written
		e.unchanged(t, func() {
			if _, err := e.s.BecomeLeader(ctx, "A#1#x"); !errors.Is(err, storage.ErrNotHolder) {
				t.Fatalf("BecomeLeader without lock = %v, want ErrNotHolder", err)
			}
		})
		before := time.Now().Add(-time.Minute).UnixMilli()
		f1 := e.lead(t, "A#1#x")
		if f1.Epoch < before {
			t.Fatalf("epoch = %d, want >= Redis TIME in ms (about %d)", f1.Epoch, before)
		}
		li, err := e.s.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if li.Identity != "A#1#x" || li.Epoch != f1.Epoch || time.Since(li.Since) > time.Minute {
			t.Fatalf("Leader = %+v", li)
		}
		if err := e.s.CheckFence(ctx, f1); err != nil {
			t.Fatal(err)
		}
		// lock moves to B: A is fenced, leader identity "" until B becomes leader
		e.c.Set(ctx, k.Lock(), "B#2#y", time.Minute)
		if li, _ := e.s.Leader(ctx); li.Identity != "" || li.Epoch != f1.Epoch {
			t.Fatalf("Leader after lock moved = %+v, want no identity", li)
		}
		if err := e.s.CheckFence(ctx, f1); !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("CheckFence after lock moved = %v", err)
		}
		if _, err := e.s.BecomeLeader(ctx, "A#1#x"); !errors.Is(err, storage.ErrNotHolder) {
			t.Fatalf("old holder BecomeLeader = %v", err)
		}
		f2 := e.lead(t, "B#2#y")
		if f2.Epoch <= f1.Epoch {
			t.Fatalf("epoch = %d, want > %d", f2.Epoch, f1.Epoch)
		}
		for _, bad := range []storage.Fence{f1, {Epoch: f1.Epoch, Holder: "B#2#y"}, {Epoch: f2.Epoch, Holder: "A#1#x"}} {
			if err := e.s.CheckFence(ctx, bad); !errors.Is(err, storage.ErrFenced) {
				t.Errorf("CheckFence(%+v) = %v, want ErrFenced", bad, err)
			}
		}
		// lock gone
		e.c.Del(ctx, k.Lock())
		if li, _ := e.s.Leader(ctx); li.Identity != "" {
			t.Fatalf("Leader without lock = %+v", li)
		}
		if _, err := e.s.BecomeLeader(ctx, ""); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("empty stamp = %v", err)
		}
		// A rollback (a promoted replica that missed the last epoch
		// changes): the fence goes back to an old epoch; the next leader
		// still gets one above every epoch issued, the clock having moved.
		e.c.HSet(ctx, k.Fence(), "epoch", 1)
		e.c.Set(ctx, k.Lock(), "C#3#z", time.Minute)
		time.Sleep(2 * time.Millisecond)
		f3 := e.lead(t, "C#3#z")
		if f3.Epoch <= f2.Epoch {
			t.Fatalf("epoch after rollback = %d, want > %d (never issued twice)", f3.Epoch, f2.Epoch)
		}
		// A counter ahead of the clock keeps counting.
		e.c.HSet(ctx, k.Fence(), "epoch", f3.Epoch+1e9)
		if f4 := e.lead(t, "C#3#z"); f4.Epoch != f3.Epoch+1e9+1 {
			t.Fatalf("epoch ahead of the clock: %d, want %d", f4.Epoch, f3.Epoch+1e9+1)
		}
	})
}

func TestStore_NOSCRIPT(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		e.lead(t, "A#1#x")
		if err := e.c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1"}); err != nil {
			t.Fatalf("submit after SCRIPT FLUSH: %v", err)
		}
		if _, err := e.s.BecomeLeader(ctx, "A#1#x"); err != nil {
			t.Fatalf("become leader after SCRIPT FLUSH: %v", err)
		}
	})
	t.Run("restart", func(t *testing.T) {
		srv := redistest.Start(t)
		c := srv.Client(t)
		s, err := storage.New(c, "ns")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		srv.Restart(t)
		for i := 0; i < 50; i++ { // the pool may hold dead connections: go-redis retries them
			if _, err = s.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "r1"}); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("submit after restart: %v", err)
		}
		if r, _ := s.GetRun(ctx, "r1"); r.State != storage.StateWaiting {
			t.Fatalf("run = %+v", r)
		}
	})
}

func TestScripts(t *testing.T) {
	names := storage.ScriptNames()
	for _, n := range []string{"apply", "allocate_batch", "drain", "restore_apply", "fail_run", "reap"} {
		if !strings.Contains(storage.ScriptSource(n), "fencing prelude") {
			t.Errorf("script %s lacks the fencing prelude (scripts: %v)", n, names)
		}
	}
	for _, n := range []string{"submit", "snapshot", "report", "become_leader"} {
		if strings.Contains(storage.ScriptSource(n), "fencing prelude") {
			t.Errorf("script %s must not be fenced", n)
		}
	}
}
