// Command go-worker is an application's own worker, built on the worker
// library (github.com/wasmsched/wasmsched/host/worker): its handlers run
// in-process, their results go on the run, and SIGTERM drains.
//
//	go run ./examples/go-worker --redis redis://127.0.0.1:6379/0 --advertise 127.0.0.1:7070
//	wasmsched submit echo --payload hi && wasmsched run show <id>   # RESULT hi
//
// Groups: echo (the payload is the result), fail (an error), panic (a
// panic: the run fails with its message), sleep (sleeps the payload's
// duration, e.g. "2s", or until the run's context ends: a stop, a timeout,
// the end of a drain), big (a result over the 64 KiB bound: the run fails);
// any other group gets the default handler, which says so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wasmsched/wasmsched/host/worker"
)

func main() {
	redis := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	ns := flag.String("namespace", "default", "namespace")
	advertise := flag.String("advertise", "127.0.0.1:7070", "this worker's address (part of its identity)")
	slots := flag.Int("slots", 2, "runs executed at once")
	drain := flag.Duration("drain-timeout", 30*time.Second, "on SIGTERM, wait this long for the runs in flight")
	ttl := flag.Duration("heartbeat-ttl", worker.DefaultHeartbeatTTL, "heartbeat TTL")
	journal := flag.String("journal", "", "append RUN_ID TOKEN ATTEMPT per execution start to this file")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, err := worker.New(ctx, worker.Config{Redis: *redis, Namespace: *ns, Advertise: *advertise, Slots: *slots,
		HeartbeatTTL: *ttl, DrainTimeout: *drain, Journal: *journal, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-worker:", err)
		os.Exit(2)
	}
	w.Handle("echo", worker.HandlerFunc(func(_ context.Context, r *worker.Run) (string, error) {
		return r.Payload, nil
	}))
	w.Handle("fail", worker.HandlerFunc(func(_ context.Context, r *worker.Run) (string, error) {
		return "", fmt.Errorf("attempt %d of %d: %s", r.Attempt, r.MaxAttempts, r.Payload)
	}))
	w.Handle("panic", worker.HandlerFunc(func(context.Context, *worker.Run) (string, error) {
		panic("boom")
	}))
	w.Handle("sleep", worker.HandlerFunc(func(ctx context.Context, r *worker.Run) (string, error) {
		d, err := time.ParseDuration(r.Payload)
		if err != nil {
			return "", fmt.Errorf("payload %q: want a duration", r.Payload)
		}
		select {
		case <-time.After(d):
			return "slept " + d.String(), nil
		case <-ctx.Done():
			return "", errors.New("cancelled")
		}
	}))
	w.Handle("big", worker.HandlerFunc(func(context.Context, *worker.Run) (string, error) {
		return strings.Repeat("x", worker.MaxResult+1), nil
	}))
	w.HandleDefault(worker.HandlerFunc(func(_ context.Context, r *worker.Run) (string, error) {
		return "", fmt.Errorf("go-worker has no handler for group %s", r.Group)
	}))
	go func() {
		<-ctx.Done() // the first signal drains; a second stops at once
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		stop()
		<-again
		w.StopNow()
	}()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "go-worker:", err)
		os.Exit(1)
	}
}
