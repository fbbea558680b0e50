package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/recordtest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

// TestRecords_goldens: the client's records of the recordtest fixture are
// the shared goldens (the HTTP API's and the CLI's tests check the same
// files).
func TestRecords_goldens(t *testing.T) {
	ns := recordtest.Namespace
	st, err := storage.New(srv.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	wasm, _ := plugins.Builtin("wait")
	recordtest.Fixture(t, ctx, st, wasm)
	c, err := client.NewFromRedis(srv.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		recordtest.Check(t, name, b)
	}
	r, err := c.Get(ctx, recordtest.Running)
	check("run", r, err)
	g, err := c.Group(ctx, recordtest.Group)
	check("group", g, err)
	gs, err := c.Groups(ctx)
	check("groups", gs, err)
	sl, err := c.Slots(ctx)
	check("slots", sl, err)
	l, err := c.Leader(ctx)
	check("leader", l, err)
	p, err := c.List(ctx, client.ListOptions{Group: recordtest.Group, Limit: 1})
	check("page", p, err)
	sc, err := c.Schedule(ctx, recordtest.Schedule)
	check("schedule", sc, err)
}

// TestClient_List_lastPage: passing on the last page's Next gives an empty
// page (never the first page again), and an empty page's Next is "".
func TestClient_List_lastPage(t *testing.T) {
	c := newClient(t)
	for i := range 3 {
		if _, err := c.Submit(ctx, "g", client.SubmitOptions{ID: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.List(ctx, client.ListOptions{Limit: 2})
	if err != nil || len(p.Runs) != 2 || !p.More || p.Next == "" {
		t.Fatalf("first page = %+v, %v", p, err)
	}
	p, err = c.List(ctx, client.ListOptions{Cursor: p.Next, Limit: 2})
	if err != nil || len(p.Runs) != 1 || p.Runs[0].ID != "r0" || p.More || p.Next != "" {
		t.Fatalf("last page = %+v, %v: want r0, no more, no cursor (its page would be empty)", p, err)
	}
	// fewer runs than the limit: one page, no cursor (a UI showed a dead
	// "next page" for it)
	p, err = c.List(ctx, client.ListOptions{Limit: 100})
	if err != nil || len(p.Runs) != 3 || p.More || p.Next != "" {
		t.Fatalf("one short page = %d runs, more %v, next %q, %v: want 3, no more, no cursor", len(p.Runs), p.More, p.Next, err)
	}
	p, err = c.List(ctx, client.ListOptions{After: 2})
	if err != nil || len(p.Runs) != 1 || p.Runs[0].ID != "r0" {
		t.Fatalf("After 2 = %+v, %v", p, err)
	}
	if _, err := c.List(ctx, client.ListOptions{After: 2, Cursor: "c1.x"}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("After and Cursor = %v, want ErrInvalid", err)
	}
}

// TestClient_Submit_idempotencyConflict: a key reused with another group,
// body or run id is ErrConflict naming the first run, and writes nothing;
// the same request again is a replay.
func TestClient_Submit_idempotencyConflict(t *testing.T) {
	c := newClient(t)
	first, err := c.Submit(ctx, "g", client.SubmitOptions{Payload: "a", IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]struct {
		group string
		opts  client.SubmitOptions
	}{
		"group":    {"other", client.SubmitOptions{Payload: "a", IdempotencyKey: "k"}},
		"payload":  {"g", client.SubmitOptions{Payload: "b", IdempotencyKey: "k"}},
		"slots":    {"g", client.SubmitOptions{Payload: "a", Slots: 2, IdempotencyKey: "k"}},
		"priority": {"g", client.SubmitOptions{Payload: "a", Priority: 1, IdempotencyKey: "k"}},
		"id":       {"g", client.SubmitOptions{Payload: "a", ID: "mine", IdempotencyKey: "k"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Submit(ctx, o.group, o.opts)
			if !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), first.ID) {
				t.Fatalf("Submit = %v, want ErrConflict naming %s", err, first.ID)
			}
		})
	}
	again, replayed, err := c.SubmitReplay(ctx, "g", client.SubmitOptions{Payload: "a", IdempotencyKey: "k"})
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("the same request: %+v replayed=%v err=%v", again, replayed, err)
	}
	p, err := c.List(ctx, client.ListOptions{})
	if err != nil || len(p.Runs) != 1 {
		t.Fatalf("runs after the conflicts: %+v, %v", p.Runs, err)
	}
}
