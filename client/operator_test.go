package client_test

import (
	"errors"
	"testing"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/storage"
)

// TestClient_policyActions: a policy's versions are activated, rolled back
// and deleted through the client as `policy activate|rollback|delete` and
// the API do, each recorded in its history, with the store's refusals.
func TestClient_policyActions(t *testing.T) {
	c := newClient(t)
	st, err := storage.New(srv.Client(t), c.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Policy(ctx, "p"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Policy of nothing pushed: %v, want ErrNotFound", err)
	}
	for i, blob := range []string{"one", "two"} {
		if _, err := st.PushPolicy(ctx, storage.PushRequest{Name: "p", Kind: "serial", Who: "ann", Blob: []byte(blob), Activate: i == 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ActivatePolicy(ctx, "p", 3, "bob", "no such"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("activate version 3 of 2: %v, want ErrNotFound", err)
	}
	if err := c.ActivatePolicy(ctx, "p", 2, "bob", "try two"); err != nil {
		t.Fatal(err)
	}
	p, err := c.Policy(ctx, "p")
	if err != nil || p.Active != 2 || len(p.Versions) != 2 {
		t.Fatalf("after activate 2: %+v %v", p, err)
	}
	if last := p.History[len(p.History)-1]; last.Action != "activate" || last.Who != "bob" || last.Note != "try two" || last.Version != 2 {
		t.Fatalf("history's last entry %+v, want bob's activate of 2", last)
	}
	if _, err := c.DeletePolicy(ctx, "p", 2, "bob", ""); !errors.Is(err, client.ErrBadState) {
		t.Fatalf("delete the active version: %v, want ErrBadState", err)
	}
	v, err := c.RollbackPolicy(ctx, "p", "bob", "back")
	if err != nil || v.Version != 1 || v.SHA256 != p.Versions[0].SHA256 {
		t.Fatalf("rollback: %+v %v, want version 1", v, err)
	}
	if _, err := c.DeletePolicy(ctx, "p", 2, "bob", "unused"); err != nil {
		t.Fatal(err)
	}
	if p, _ = c.Policy(ctx, "p"); !p.Versions[1].Deleted || p.Active != 1 {
		t.Fatalf("after delete of 2: %+v", p)
	}
}

// TestClient_DeleteGroup: a group with waiting runs is refused unless
// forced; forced, its waiting runs are discarded and counted; an unknown
// group is ErrNotFound. Exists says whether the namespace holds anything.
func TestClient_DeleteGroup(t *testing.T) {
	c := newClient(t)
	if ok, err := c.Exists(ctx); err != nil || ok {
		t.Fatalf("Exists of a fresh namespace: %v %v", ok, err)
	}
	for range 2 {
		if _, err := c.Submit(ctx, "g", client.SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := c.Exists(ctx); err != nil || !ok {
		t.Fatalf("Exists after a submit: %v %v", ok, err)
	}
	if _, err := c.DeleteGroup(ctx, "g", false, ""); !errors.Is(err, client.ErrBadState) {
		t.Fatalf("delete with waiting runs: %v, want ErrBadState", err)
	}
	n, err := c.DeleteGroup(ctx, "g", true, "cleanup")
	if err != nil || n != 2 {
		t.Fatalf("forced delete: %d %v, want 2 discarded", n, err)
	}
	if _, err := c.Group(ctx, "g"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Group after delete: %v, want ErrNotFound", err)
	}
	if _, err := c.DeleteGroup(ctx, "g", false, ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete an unknown group: %v, want ErrNotFound", err)
	}
}
