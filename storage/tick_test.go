package storage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_Tick(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		if tk, err := e.s.LastTick(ctx); err != nil || tk != (storage.Tick{}) {
			t.Fatalf("LastTick before any tick = %+v, %v", tk, err)
		}
		// no leader: fenced, nothing written
		e.unchanged(t, func() {
			if err := e.s.Tick(ctx, storage.Fence{Epoch: 1, Holder: "A#1#x"}); !errors.Is(err, storage.ErrFenced) {
				t.Fatalf("Tick without leadership = %v, want ErrFenced", err)
			}
		})
		f1 := e.lead(t, "A#1#x")
		for i := 1; i <= 3; i++ {
			if err := e.s.Tick(ctx, f1); err != nil {
				t.Fatal(err)
			}
		}
		tk, err := e.s.LastTick(ctx)
		if err != nil || tk.Holder != "A#1#x" || tk.Epoch != f1.Epoch || tk.Count != 3 || time.Since(tk.At) > time.Minute {
			t.Fatalf("LastTick = %+v, %v", tk, err)
		}
		// B takes over: A's ticks are fenced and write nothing; B's count restarts.
		e.c.Set(ctx, keyspace.Of(e.s).Lock(), "B#2#y", time.Minute)
		f2 := e.lead(t, "B#2#y")
		e.unchanged(t, func() {
			for _, bad := range []storage.Fence{f1, {Epoch: f2.Epoch, Holder: "A#1#x"}, {Epoch: f1.Epoch, Holder: "B#2#y"}} {
				if err := e.s.Tick(ctx, bad); !errors.Is(err, storage.ErrFenced) {
					t.Fatalf("Tick(%+v) = %v, want ErrFenced", bad, err)
				}
			}
		})
		if err := e.s.Tick(ctx, f2); err != nil {
			t.Fatal(err)
		}
		if tk, _ := e.s.LastTick(ctx); tk.Holder != "B#2#y" || tk.Epoch != f2.Epoch || tk.Count != 1 {
			t.Fatalf("LastTick after takeover = %+v", tk)
		}
		if err := e.s.Tick(ctx, storage.Fence{Epoch: 2}); !errors.Is(err, storage.ErrInvalid) {
			t.Fatalf("empty holder = %v", err)
		}
	})
}
