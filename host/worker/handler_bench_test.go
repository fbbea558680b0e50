package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/storage"
)

// BenchmarkRunHandler is what the worker adds to one handler call: the
// run record for the handler, its context, the goroutine with the panic
// guard, and the outcome (no Redis: the client is never used).
func BenchmarkRunHandler(b *testing.B) {
	st, err := storage.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), "bench")
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &agent{Store: st, Logger: log}
	w.withDefaults()
	w.def = HandlerFunc(func(context.Context, *Run) (string, error) { return "ok", nil })
	run := storage.Run{ID: "r1", Group: "g", Payload: "p"}
	b.ReportAllocs()
	for b.Loop() {
		e := newExecution("r1", "t1", "g", 0)
		if f := w.runHandler(e, run, log); f.outcome != storage.StateSucceeded {
			b.Fatal(f.outcome)
		}
		e.cancel()
	}
}
