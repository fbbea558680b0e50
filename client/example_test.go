package client_test

import (
	"context"
	"fmt"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/embedded"
)

// Submit a run twice with one idempotency key: the second call returns
// the first run. (Against the embedded store; give Config.Redis your
// Redis URL.)
func Example() {
	srv, err := embedded.Start("")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{Redis: srv.URL(), Namespace: "demo"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	a, err := c.Submit(ctx, "nightly", client.SubmitOptions{ID: "build-1", IdempotencyKey: "commit-4711"})
	if err != nil {
		panic(err)
	}
	b, replayed, err := c.SubmitReplay(ctx, "nightly", client.SubmitOptions{IdempotencyKey: "commit-4711"})
	if err != nil {
		panic(err)
	}
	fmt.Println(a.ID, a.State, a.Seq)
	fmt.Println(b.ID, b.State, b.Seq, "replayed:", replayed)
	// Output:
	// build-1 WAITING 1
	// build-1 WAITING 1 replayed: true
}

// Page through a group's runs with the cursor each page returns.
func ExampleClient_List() {
	srv, err := embedded.Start("")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{Redis: srv.URL()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for i := range 5 {
		if _, err := c.Submit(ctx, "etl", client.SubmitOptions{ID: fmt.Sprintf("r%d", i)}); err != nil {
			panic(err)
		}
	}
	o := client.ListOptions{Group: "etl", Limit: 2}
	for {
		p, err := c.List(ctx, o)
		if err != nil {
			panic(err)
		}
		for _, r := range p.Runs {
			fmt.Print(r.ID, " ")
		}
		fmt.Println("| more:", p.More)
		if !p.More {
			break
		}
		o = client.ListOptions{Cursor: p.Next, Limit: 2}
	}
	// Output:
	// r4 r3 | more: true
	// r2 r1 | more: true
	// r0 | more: false
}

// Follow one run until it is final.
func ExampleClient_Watch() {
	srv, err := embedded.Start("")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{Redis: srv.URL()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	r, err := c.Submit(ctx, "etl", client.SubmitOptions{ID: "job"})
	if err != nil {
		panic(err)
	}
	w, err := c.Watch(ctx, client.WatchOptions{Run: r.ID})
	if err != nil {
		panic(err)
	}
	defer w.Close()
	fmt.Println((<-w.C).Run.State) // where it is now
	if _, err := c.Stop(ctx, r.ID, "not needed"); err != nil {
		panic(err)
	}
	for ev := range w.C { // until its final state
		fmt.Println(ev.Run.State, ev.Run.Reason)
	}
	// Output:
	// WAITING
	// DISCARDED not needed
}
