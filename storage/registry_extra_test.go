package storage_test

import (
	"errors"
	"testing"

	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_AutoRollbackPolicy(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		push := func(blob string) {
			ok(e.s.PushPolicy(ctx, storage.PushRequest{Name: "p", Kind: "serial", Blob: []byte(blob), Activate: true}))(t)
		}
		push("one")
		push("two")
		gen0 := ok(e.s.PolicyGeneration(ctx))(t)
		// A stale caller (version 1 is not active) writes nothing.
		r := ok(e.s.AutoRollbackPolicy(ctx, "p", 1, "host-a", "3 failures"))(t)
		if r.RolledBack || r.Active != 2 {
			t.Fatalf("stale auto rollback: %+v", r)
		}
		if g := ok(e.s.PolicyGeneration(ctx))(t); g != gen0 {
			t.Fatalf("generation %d -> %d on a no-op", gen0, g)
		}
		if p := ok(e.s.GetPolicy(ctx, "p"))(t); p.AutoRollback != nil {
			t.Fatalf("AutoRollback before any: %+v", *p.AutoRollback)
		}
		// Version 2 is active: rolled back to 1, reason recorded.
		r = ok(e.s.AutoRollbackPolicy(ctx, "p", 2, "host-a", "3 consecutive traps"))(t)
		if !r.RolledBack || r.Active != 1 {
			t.Fatalf("auto rollback: %+v", r)
		}
		p := ok(e.s.GetPolicy(ctx, "p"))(t)
		last := p.History[len(p.History)-1]
		if p.Active != 1 || last.Action != "auto-rollback" || last.Version != 1 || last.Note != "3 consecutive traps" || last.Who != "host-a" {
			t.Fatalf("policy after auto rollback: active %d, last event %+v", p.Active, last)
		}
		info, found, err := e.s.LastAutoRollback(ctx, "p")
		if err != nil || !found || info.From != 2 || info.To != 1 || info.Reason != "3 consecutive traps" || info.At.IsZero() {
			t.Fatalf("last auto rollback: %+v %v %v", info, found, err)
		}
		// GetPolicy reads it with Active, in one transaction.
		if p.AutoRollback == nil || *p.AutoRollback != info {
			t.Fatalf("GetPolicy's AutoRollback = %+v, want %+v", p.AutoRollback, info)
		}
		// A second host reacting to the same failures: no-op.
		if r := ok(e.s.AutoRollbackPolicy(ctx, "p", 2, "host-b", "3 consecutive traps"))(t); r.RolledBack {
			t.Fatalf("second auto rollback rolled back: %+v", r)
		}
		// Nothing earlier: version 0 (the built-in of a built-in name; for
		// this name no active version: its groups hold).
		if r := ok(e.s.AutoRollbackPolicy(ctx, "p", 1, "h", "x"))(t); !r.RolledBack || r.Active != 0 {
			t.Fatalf("first version rolled back: %+v", r)
		}
		if p := ok(e.s.GetPolicy(ctx, "p"))(t); p.Active != 0 || p.AutoRollback == nil || p.AutoRollback.From != 1 || p.AutoRollback.To != 0 {
			t.Fatalf("after rolling back the first version: active %d, auto rollback %+v", p.Active, p.AutoRollback)
		}
		if _, err := e.s.AutoRollbackPolicy(ctx, "nope", 1, "h", "x"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown policy: %v", err)
		}
		if _, _, err := e.s.LastAutoRollback(ctx, "never"); err != nil {
			t.Fatal(err)
		}
	})
}
