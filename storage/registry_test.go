package storage_test

import (
	"errors"
	"testing"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

func TestStore_Policy(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		sub := e.c.Subscribe(ctx, keyspace.Of(e.s).PolicyChannel())
		defer sub.Close()
		ok(sub.Receive(ctx))(t)
		v1 := ok(e.s.PushPolicy(ctx, storage.PushRequest{Name: "p", Kind: "serial", Who: "ann", Note: "first", Blob: []byte("one"), Activate: true}))(t)
		v2 := ok(e.s.PushPolicy(ctx, storage.PushRequest{Name: "p", Kind: "serial", Who: "bob", Blob: []byte("two")}))(t)
		if v1.Version != 1 || v2.Version != 2 || v1.SHA256 == v2.SHA256 {
			t.Fatalf("versions %+v %+v", v1, v2)
		}
		if m := ok(sub.ReceiveMessage(ctx))(t); m.Payload != "p 1 1" {
			t.Fatalf("published %q", m.Payload)
		}
		for _, tc := range []struct {
			name string
			req  storage.PushRequest
			want error
		}{
			{"duplicate-sha", storage.PushRequest{Name: "p", Kind: "serial", Blob: []byte("one")}, storage.ErrDuplicate},
			{"kind-mismatch", storage.PushRequest{Name: "p", Kind: "slot-reuse", Blob: []byte("three")}, storage.ErrInvalid},
			{"bad-name", storage.PushRequest{Name: "p q", Kind: "serial", Blob: []byte("x")}, storage.ErrInvalid},
			{"empty-blob", storage.PushRequest{Name: "p", Kind: "serial"}, storage.ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					pv, err := e.s.PushPolicy(ctx, tc.req)
					if !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
					if tc.want == storage.ErrDuplicate && pv.Version != 1 {
						t.Fatalf("duplicate returned %+v, want version 1", pv)
					}
				})
			})
		}
		mustNil(t, e.s.ActivatePolicy(ctx, "p", 2, "bob", "go"))
		mustNil(t, e.s.ActivatePolicy(ctx, "p", 2, "bob", "again")) // no-op
		if g := ok(e.s.PolicyGeneration(ctx))(t); g != 2 {
			t.Fatalf("gen = %d", g)
		}
		for _, tc := range []struct {
			name string
			pol  string
			ver  int
			want error
		}{{"unknown-version", "p", 9, storage.ErrNotFound}, {"unknown-policy", "zz", 1, storage.ErrNotFound}, {"negative", "p", -1, storage.ErrInvalid}} {
			t.Run("activate-"+tc.name, func(t *testing.T) {
				e.unchanged(t, func() {
					if err := e.s.ActivatePolicy(ctx, tc.pol, tc.ver, "x", ""); !errors.Is(err, tc.want) {
						t.Fatalf("err = %v, want %v", err, tc.want)
					}
				})
			})
		}
		rb := ok(e.s.RollbackPolicy(ctx, "p", "cy", "bad"))(t)
		if rb.Version != 1 || rb.SHA256 != v1.SHA256 {
			t.Fatalf("rollback = %+v", rb)
		}
		p := ok(e.s.GetPolicy(ctx, "p"))(t)
		if p.Active != 1 || p.Kind != "serial" || len(p.Versions) != 2 || len(p.History) != 5 || p.History[4].Action != "rollback" || p.Versions[0].Who != "ann" || p.Versions[0].Note != "first" {
			t.Fatalf("policy = %+v", p)
		}
		// past the first activation: version 0 (the built-in of a built-in
		// name, none for another), then nothing further back
		if rb := ok(e.s.RollbackPolicy(ctx, "p", "cy", ""))(t); rb.Version != 0 {
			t.Fatalf("rollback past the first = %+v, want version 0", rb)
		}
		e.unchanged(t, func() {
			if _, err := e.s.RollbackPolicy(ctx, "p", "cy", ""); !errors.Is(err, storage.ErrBadState) {
				t.Fatalf("rollback from version 0 = %v", err)
			}
		})
		// version 0 activated by hand, and left by a rollback
		mustNil(t, e.s.ActivatePolicy(ctx, "p", 1, "dan", ""))
		mustNil(t, e.s.ActivatePolicy(ctx, "p", 0, "dan", "none"))
		if p := ok(e.s.GetPolicy(ctx, "p"))(t); p.Active != 0 || p.History[len(p.History)-1].Action != "activate" {
			t.Fatalf("after activate 0: %+v", p)
		}
		if rb := ok(e.s.RollbackPolicy(ctx, "p", "dan", ""))(t); rb.Version != 1 {
			t.Fatalf("rollback from an activated 0 = %+v, want version 1", rb)
		}
		if b := ok(e.s.PolicyBlob(ctx, v2.SHA256))(t); string(b) != "two" {
			t.Fatalf("blob = %q", b)
		}
		if _, err := e.s.PolicyBlob(ctx, "00"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("blob unknown = %v", err)
		}
		if ps := ok(e.s.ListPolicies(ctx))(t); len(ps) != 1 {
			t.Fatalf("list = %+v", ps)
		}
	})
}

// A change of a policy's active version (push with activation, activate,
// rollback, auto-rollback) marks every group dirty, so each is decided again
// with the new version instead of waiting for its next submit or finish.
func TestStore_PolicyActivationMarksGroupsDirty(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		settle := func(t *testing.T) {
			t.Helper()
			mustNil(t, e.c.Del(ctx, keyspace.Of(e.s).Dirty()).Err())
		}
		wantDirty := func(t *testing.T, what string, want []string) {
			t.Helper()
			got := ok(e.s.DirtyGroups(ctx, 0))(t)
			if len(got) != len(want) || (len(got) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
				t.Fatalf("after %s: dirty = %v, want %v", what, got, want)
			}
		}
		ok(e.s.SetGroup(ctx, "g1", "p", 1))(t)
		ok(e.s.SetGroup(ctx, "g2", "wait", 1))(t)
		all := []string{"g1", "g2"}

		settle(t)
		ok(e.s.PushPolicy(ctx, storage.PushRequest{Name: "p", Kind: "serial", Blob: []byte("v1"), Activate: true}))(t)
		wantDirty(t, "push --activate", all)

		settle(t)
		ok(e.s.PushPolicy(ctx, storage.PushRequest{Name: "p", Kind: "serial", Blob: []byte("v2")}))(t)
		wantDirty(t, "push --no-activate", nil)

		mustNil(t, e.s.ActivatePolicy(ctx, "p", 2, "ops", ""))
		wantDirty(t, "activate", all)

		settle(t)
		ok(e.s.RollbackPolicy(ctx, "p", "ops", ""))(t)
		wantDirty(t, "rollback", all)

		settle(t)
		mustNil(t, e.s.ActivatePolicy(ctx, "p", 2, "ops", ""))
		settle(t)
		if rb := ok(e.s.AutoRollbackPolicy(ctx, "p", 2, "host", "traps"))(t); !rb.RolledBack {
			t.Fatalf("auto-rollback did not roll back: %+v", rb)
		}
		wantDirty(t, "auto-rollback", all)

		settle(t)
		if rb := ok(e.s.AutoRollbackPolicy(ctx, "p", 2, "host", "again"))(t); rb.RolledBack {
			t.Fatalf("second auto-rollback rolled back: %+v", rb)
		}
		wantDirty(t, "auto-rollback of a version no longer active", nil)
	})
}

func TestStore_DeletePolicy(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		push := func(name, blob string, activate bool) storage.PolicyVersion {
			return ok(e.s.PushPolicy(ctx, storage.PushRequest{Name: name, Kind: "serial", Who: "t", Blob: []byte(blob), Activate: activate}))(t)
		}
		v1 := push("p", "one", true)
		v2 := push("p", "two", false)
		push("p", "three", true) // v3 active; activations: 1, 3
		push("q", "two", true)   // q shares v2's bytes
		t.Run("active version refused", func(t *testing.T) {
			e.unchanged(t, func() {
				if _, err := e.s.DeletePolicy(ctx, "p", 3, "t", ""); !errors.Is(err, storage.ErrBadState) {
					t.Fatalf("err = %v, want ErrBadState", err)
				}
			})
		})
		t.Run("unknown", func(t *testing.T) {
			e.unchanged(t, func() {
				if _, err := e.s.DeletePolicy(ctx, "p", 9, "t", ""); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
				if _, err := e.s.DeletePolicy(ctx, "nope", 1, "t", ""); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			})
		})
		// v2's bytes are also q's: the blob stays.
		if n := ok(e.s.DeletePolicy(ctx, "p", 2, "t", "unused"))(t); n != 0 {
			t.Fatalf("deleted %d blobs of a shared version", n)
		}
		ok(e.s.PolicyBlob(ctx, v2.SHA256))(t)
		// v1 is only p's: its blob goes, and rollback skips it.
		if n := ok(e.s.DeletePolicy(ctx, "p", 1, "t", ""))(t); n != 1 {
			t.Fatalf("deleted %d blobs, want 1", n)
		}
		if _, err := e.s.PolicyBlob(ctx, v1.SHA256); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("blob of a deleted version: %v", err)
		}
		p := ok(e.s.GetPolicy(ctx, "p"))(t)
		if len(p.Versions) != 3 || !p.Versions[0].Deleted || !p.Versions[1].Deleted || p.Versions[2].Deleted || p.Active != 3 {
			t.Fatalf("after deletes: %+v", p)
		}
		// the deleted versions left the stack: a rollback goes past them
		// to version 0, recording one entry, never "rollback" to the
		// version already active
		h := len(ok(e.s.GetPolicy(ctx, "p"))(t).History)
		if rb, err := e.s.RollbackPolicy(ctx, "p", "t", ""); err != nil || rb.Version != 0 {
			t.Fatalf("rollback past deleted versions: %+v %v, want version 0", rb, err)
		}
		if p := ok(e.s.GetPolicy(ctx, "p"))(t); len(p.History) != h+1 || p.Active != 0 {
			t.Fatalf("after the rollback: %d history entries (want %d), active %d", len(p.History), h+1, p.Active)
		}
		mustNil(t, e.s.ActivatePolicy(ctx, "p", 3, "t", ""))
		if err := e.s.ActivatePolicy(ctx, "p", 1, "t", ""); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("activate a deleted version: %v", err)
		}
		if _, err := e.s.DeletePolicy(ctx, "p", 1, "t", ""); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("delete again: %v", err)
		}
		// The whole policy: refused while a version is active.
		if _, err := e.s.DeletePolicy(ctx, "q", 0, "t", ""); !errors.Is(err, storage.ErrBadState) {
			t.Fatalf("whole delete with an active version: %v", err)
		}
		push("r", "four", false)
		if n := ok(e.s.DeletePolicy(ctx, "r", 0, "t", ""))(t); n != 1 {
			t.Fatalf("whole delete removed %d blobs, want 1", n)
		}
		if _, err := e.s.GetPolicy(ctx, "r"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("deleted policy: %v", err)
		}
	})
}
