package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

var (
	srv  *redistest.Server
	nsID atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "client-redis-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err = redistest.StartServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Kill()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// newClient opens a client on a fresh namespace of the test's redis-server.
func newClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), client.Config{Redis: srv.URL(), Namespace: fmt.Sprintf("c%d", nsID.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var ctx = context.Background()

func TestConfig_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  client.Config
		bad  string
	}{
		{"zero", client.Config{}, ""},
		{"bad url", client.Config{Redis: "http://x"}, "Redis"},
		{"bad namespace", client.Config{Namespace: "a b"}, "Namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != (tc.bad != "") || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tc.bad)
			}
		})
	}
	if _, err := client.New(ctx, client.Config{Redis: "redis://127.0.0.1:1/0"}); err == nil {
		t.Fatal("New with no Redis listening: no error")
	}
}

func TestClient_Submit(t *testing.T) {
	c := newClient(t)
	r, err := c.Submit(ctx, "g", client.SubmitOptions{ID: "a", Slots: 2, Priority: 5, Payload: "p", Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "a" || r.Group != "g" || r.State != "WAITING" || r.Slots != 2 || r.Priority != 5 || r.Seq != 1 || r.SubmittedAt == nil {
		t.Fatalf("Submit = %+v", r)
	}
	got, err := c.Get(ctx, "a")
	if err != nil || got.Payload != "p" || got.DurationMS != 1000 {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name  string
		group string
		o     client.SubmitOptions
		want  error
	}{
		{"duplicate id", "g", client.SubmitOptions{ID: "a"}, client.ErrExists},
		{"bad group", "a b", client.SubmitOptions{}, client.ErrInvalid},
		{"negative slots", "g", client.SubmitOptions{Slots: -1}, client.ErrInvalid},
		{"oversized key", "g", client.SubmitOptions{IdempotencyKey: strings.Repeat("k", 300)}, client.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Submit(ctx, tc.group, tc.o); !errors.Is(err, tc.want) {
				t.Fatalf("Submit = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := c.Get(ctx, "nosuch"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get unknown = %v", err)
	}
}

// TestClient_Submit_idempotent: concurrent submits with one key make one run.
func TestClient_Submit_idempotent(t *testing.T) {
	c := newClient(t)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	replays := atomic.Int64{}
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, replayed, err := c.SubmitReplay(ctx, "g", client.SubmitOptions{IdempotencyKey: "once"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.ID
			if replayed {
				replays.Add(1)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("ids %v: one key made several runs", ids)
		}
	}
	if replays.Load() != int64(len(ids)-1) {
		t.Fatalf("%d replays, want %d", replays.Load(), len(ids)-1)
	}
	p, err := c.List(ctx, client.ListOptions{})
	if err != nil || len(p.Runs) != 1 {
		t.Fatalf("runs = %+v, %v", p.Runs, err)
	}
}

// TestClient_List_concurrentSubmits: paging from a first page to the last
// while other runs are submitted lists every run older than the first page's
// newest exactly once.
func TestClient_List_concurrentSubmits(t *testing.T) {
	c := newClient(t)
	for i := range 300 {
		if _, err := c.Submit(ctx, fmt.Sprintf("g%d", i%3), client.SubmitOptions{ID: fmt.Sprintf("r%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Submit(ctx, fmt.Sprintf("g%d", i%3), client.SubmitOptions{ID: fmt.Sprintf("n%05d", i)}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	seen := map[string]int{}
	var top int64
	o := client.ListOptions{Limit: 7}
	for {
		p, err := c.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Runs {
			if top == 0 {
				top = r.Seq
			}
			seen[r.ID]++
		}
		if p.Next == "" {
			break
		}
		o = client.ListOptions{Cursor: p.Next, Limit: 7}
	}
	close(stop)
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("run %s listed %d times", id, n)
		}
	}
	if int64(len(seen)) != top {
		t.Fatalf("listed %d runs, want every run of seq 1..%d", len(seen), top)
	}
	// filters ride in the cursor
	p, err := c.List(ctx, client.ListOptions{Group: "g1", Limit: 10})
	if err != nil || p.Next == "" {
		t.Fatal(err)
	}
	p2, err := c.List(ctx, client.ListOptions{Cursor: p.Next, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p2.Runs {
		if r.Group != "g1" {
			t.Fatalf("cursor page of group g1 has %s of %s", r.ID, r.Group)
		}
	}
	for _, tc := range []struct {
		name string
		o    client.ListOptions
	}{
		{"bad cursor", client.ListOptions{Cursor: "x"}},
		{"cursor of another group", client.ListOptions{Cursor: p.Next, Group: "g2"}},
		{"limit too big", client.ListOptions{Limit: client.MaxListLimit + 1}},
		{"bad state", client.ListOptions{State: "NOPE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.List(ctx, tc.o); !errors.Is(err, client.ErrInvalid) {
				t.Fatalf("List = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestClient_Stop(t *testing.T) {
	c := newClient(t)
	if _, err := c.Submit(ctx, "g", client.SubmitOptions{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Stop(ctx, "a", "")
	if err != nil || r.State != "DISCARDED" || r.Reason != "stopped by client" {
		t.Fatalf("Stop = %+v, %v", r, err)
	}
	if _, err := c.Stop(ctx, "a", "again"); !errors.Is(err, client.ErrBadState) {
		t.Fatalf("Stop final = %v", err)
	}
	if _, err := c.Stop(ctx, "nosuch", ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Stop unknown = %v", err)
	}
}

func TestClient_Groups(t *testing.T) {
	c := newClient(t)
	g, err := c.SetGroup(ctx, "g", client.GroupSettings{Policy: "priority", MaxActive: 3})
	if err != nil || g.Policy != "priority" || g.MaxActive != 3 || g.Window != limits.DefaultWindow || g.Retention != "default" {
		t.Fatalf("SetGroup = %+v, %v", g, err)
	}
	if _, err := c.Submit(ctx, "g", client.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	g, err = c.Group(ctx, "g")
	if err != nil || g.Waiting != 1 {
		t.Fatalf("Group = %+v, %v", g, err)
	}
	if _, err := c.Group(ctx, "nosuch"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Group unknown = %v", err)
	}
	if _, err := c.SetGroup(ctx, "g", client.GroupSettings{MaxActive: limits.MaxMaxActive + 1}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("SetGroup too big = %v", err)
	}
	gs, err := c.Groups(ctx)
	if err != nil || len(gs) != 1 || gs[0].Name != "g" {
		t.Fatalf("Groups = %+v, %v", gs, err)
	}
}

// TestClient_Watch: a group watch sees its group's changes only; a run
// watch starts with the run as it is and ends after its final state.
func TestClient_Watch(t *testing.T) {
	c := newClient(t)
	gw, err := c.Watch(ctx, client.WatchOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	for _, g := range []string{"other", "g"} {
		if _, err := c.Submit(ctx, g, client.SubmitOptions{ID: g + "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	rw, err := c.Watch(ctx, client.WatchOptions{Run: "g-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stop(ctx, "g-1", "done"); err != nil {
		t.Fatal(err)
	}
	var states []string
	for ev := range rw.C {
		states = append(states, ev.Run.State)
	}
	if strings.Join(states, " ") != "WAITING DISCARDED" {
		t.Fatalf("run watch saw %v", states)
	}
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-gw.C:
			got = append(got, ev.Run.ID+":"+ev.Run.State)
		case <-timeout:
			t.Fatalf("group watch saw %v", got)
		}
	}
	if strings.Join(got, " ") != "g-1:WAITING g-1:DISCARDED" && strings.Join(got, " ") != "g-1:DISCARDED g-1:DISCARDED" {
		t.Fatalf("group watch saw %v", got)
	}
	for _, o := range []client.WatchOptions{{Run: "a", Group: "g"}, {Run: "a b"}} {
		if _, err := c.Watch(ctx, o); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("Watch(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	if _, err := c.Watch(ctx, client.WatchOptions{Run: "nosuch"}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Watch unknown run = %v", err)
	}
}
