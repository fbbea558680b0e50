package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/worker"
	"github.com/wasmsched/wasmsched/internal/embedded"
	"github.com/wasmsched/wasmsched/storage"
)

// A worker with one handler, against the embedded store: a leader
// (wasmsched serve in production) decides, the worker executes, and the
// submitter reads the handler's result on the run.
func Example() {
	srv, err := embedded.Start("")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// the leader
	rdb, err := storage.Connect(ctx, srv.URL())
	if err != nil {
		panic(err)
	}
	defer rdb.Close()
	st, err := storage.New(rdb, "demo")
	if err != nil {
		panic(err)
	}
	h, err := host.New(ctx, host.Config{Store: st, Advertise: "example-host", Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer h.Close(context.Background())
	go func() { _ = h.Run(ctx) }()

	// the worker: a handler for group "greet"
	w, err := worker.New(ctx, worker.Config{Redis: srv.URL(), Namespace: "demo", Advertise: "example-worker", Logger: quiet})
	if err != nil {
		panic(err)
	}
	w.Handle("greet", worker.HandlerFunc(func(ctx context.Context, r *worker.Run) (string, error) {
		return "hello, " + r.Payload, nil
	}))
	stopped := make(chan struct{})
	go func() { _ = w.Run(ctx); close(stopped) }()

	// the application
	c, err := client.New(ctx, client.Config{Redis: srv.URL(), Namespace: "demo"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	run, err := c.Submit(ctx, "greet", client.SubmitOptions{Payload: "world"})
	if err != nil {
		panic(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !run.Final() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if run, err = c.Get(ctx, run.ID); err != nil {
			panic(err)
		}
	}
	fmt.Println(run.State, run.Result)
	cancel()
	<-stopped
	// Output:
	// SUCCEEDED hello, world
}
