package leader

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
)

// next returns the listener's next event, failing after 10 s.
func next(t *testing.T, ch <-chan BusEvent, what string) BusEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no event after 10s", what)
		return BusEvent{}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Listeners of two channels share one connection; each gets a Subscribed
// event, then only its channel's messages; after the connection is killed
// every listener gets Subscribed again and messages flow; the last
// listener of a channel unsubscribes it, the last of all closes the
// connection.
func TestBus_Subscribe(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client(t)
	ctx := context.Background()
	b := NewBus(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a1, unA1 := b.Subscribe("a")
	a2, unA2 := b.Subscribe("a")
	b1, unB1 := b.Subscribe("b")
	for name, ch := range map[string]<-chan BusEvent{"a1": a1, "a2": a2, "b1": b1} {
		if ev := next(t, ch, name); !ev.Subscribed {
			t.Fatalf("%s: first event %+v, want Subscribed", name, ev)
		}
	}
	// a1 may see a second confirmation (a2's SUBSCRIBE of the same channel)
	drainSubscribed := func(ch <-chan BusEvent, name string) BusEvent {
		t.Helper()
		for {
			if ev := next(t, ch, name); !ev.Subscribed {
				return ev
			}
		}
	}
	if n := redistest.PubSubConns(t, c); n != 1 {
		t.Fatalf("%d pub/sub connections, want 1", n)
	}
	c.Publish(ctx, "a", "x")
	c.Publish(ctx, "b", "y")
	for name, ch := range map[string]<-chan BusEvent{"a1": a1, "a2": a2} {
		if ev := drainSubscribed(ch, name); ev.Payload != "x" {
			t.Fatalf("%s: %+v, want x", name, ev)
		}
	}
	if ev := drainSubscribed(b1, "b1"); ev.Payload != "y" {
		t.Fatalf("b1: %+v, want y (and never a's x)", ev)
	}

	// Kill the connection: go-redis reconnects and resubscribes.
	if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan BusEvent{"a1": a1, "a2": a2, "b1": b1} {
		if ev := next(t, ch, name+" after the kill"); !ev.Subscribed {
			t.Fatalf("%s after the kill: %+v, want Subscribed", name, ev)
		}
	}
	c.Publish(ctx, "a", "z")
	if ev := drainSubscribed(a1, "a1"); ev.Payload != "z" {
		t.Fatalf("a1 after the reconnect: %+v, want z", ev)
	}

	unA1()
	unA1() // idempotent
	c.Publish(ctx, "a", "w")
	if ev := drainSubscribed(a2, "a2"); ev.Payload != "z" {
		t.Fatalf("a2: %+v, want z", ev)
	}
	if ev := drainSubscribed(a2, "a2"); ev.Payload != "w" {
		t.Fatalf("a2: %+v, want w", ev)
	}
	unA2()
	waitUntil(t, "channel a unsubscribed", func() bool {
		n, err := c.PubSubNumSub(ctx, "a").Result()
		return err == nil && n["a"] == 0
	})
	if n := redistest.PubSubConns(t, c); n != 1 {
		t.Fatalf("%d pub/sub connections with b still listened to, want 1", n)
	}
	unB1()
	waitUntil(t, "no pub/sub connection left", func() bool { return redistest.PubSubConns(t, c) == 0 })

	// A new listener opens a new connection.
	a3, unA3 := b.Subscribe("a")
	defer unA3()
	if ev := next(t, a3, "a3"); !ev.Subscribed {
		t.Fatalf("a3: %+v, want Subscribed", ev)
	}
}

// TestBus_SubscribeBuffered: a burst of 1,000 messages published while the
// listeners read nothing reaches a listener with a buffer of 2,048 whole
// and in order; a default listener of the same channel keeps its first 16
// (events past a full buffer are dropped, never blocking the others).
func TestBus_SubscribeBuffered(t *testing.T) {
	r := redistest.Start(t)
	c := r.Client(t)
	ctx := context.Background()
	b := NewBus(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	big, unBig := b.SubscribeBuffered("w", 2048)
	defer unBig()
	small, unSmall := b.Subscribe("w")
	defer unSmall()
	for name, ch := range map[string]<-chan BusEvent{"big": big, "small": small} {
		if ev := next(t, ch, name); !ev.Subscribed {
			t.Fatalf("%s: first event %+v, want Subscribed", name, ev)
		}
	}
	// small's buffer may hold big's SUBSCRIBE confirmation too (and vice
	// versa): read both until the burst's first message
	const n = 1000
	pipe := c.Pipeline()
	for i := range n {
		pipe.Publish(ctx, "w", strconv.Itoa(i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the burst delivered", func() bool { return len(big) >= n })
	got := 0
	for len(big) > 0 {
		ev := <-big
		if ev.Subscribed {
			continue
		}
		if ev.Payload != strconv.Itoa(got) {
			t.Fatalf("big: message %d is %q", got, ev.Payload)
		}
		got++
	}
	if got != n {
		t.Fatalf("big got %d of %d messages", got, n)
	}
	if l := len(small); l != busBuffer {
		t.Fatalf("small holds %d events, want its buffer's %d (the rest dropped)", l, busBuffer)
	}
}
