package leader

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// busPing is how long the bus waits for a message before it pings the
// connection (detects a half-open connection).
const busPing = 15 * time.Second

// busBuffer is each listener's event buffer. Events are wake-ups whose
// consumers have their own safety net (an elector retries on its timer,
// the coordinator checks the policy generation every pass), so an event
// that finds the buffer full is dropped rather than blocking the others.
const busBuffer = 16

// BusEvent is what a Bus delivers to a listener of a channel.
type BusEvent struct {
	// Subscribed reports a confirmed (re)subscription to the channel:
	// messages published while the connection was down are lost, so a
	// listener re-reads what it watches.
	Subscribed bool
	// Payload of a message (empty for Subscribed).
	Payload string
}

// Bus carries the pub/sub channels of every namespace a process serves
// over one Redis connection: the leader-events channel each Elector
// listens on and the policy channel of each Engine. A Host makes a Bus
// of its own unless Config.Bus is set; Multi shares one among all its
// namespaces, so a process holds one pub/sub connection however many
// namespaces it serves (two per namespace before). The connection is
// opened by the first Subscribe and closed when the last listener is
// gone; go-redis reconnects and resubscribes after an error, and every
// listener of a channel then gets a Subscribed event.
//
// Redis Cluster: PUBLISH is broadcast to every node, so the one
// connection, whichever node it is on, receives every namespace's
// messages.
type Bus struct {
	client Subscriber
	log    *slog.Logger

	mu   sync.Mutex
	subs map[string]map[*busListener]struct{} // channel -> listeners
	ps   *redis.PubSub                        // nil while nobody listens
	stop context.CancelFunc
	done chan struct{} // closed when the receive loop of ps has returned
}

type busListener struct{ ch chan BusEvent }

// Subscriber opens pub/sub connections: a *storage.Store, or the Redis
// client a multi-namespace host shares.
type Subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// NewBus returns a Bus on client; it connects on the first Subscribe.
func NewBus(client Subscriber, log *slog.Logger) *Bus {
	if log == nil {
		log = slog.Default()
	}
	return &Bus{client: client, log: log, subs: map[string]map[*busListener]struct{}{}}
}

// Subscribe adds a listener of channel and returns its events and a
// function that removes it (call it once). The first event is Subscribed
// once Redis has confirmed the subscription. Its buffer holds busBuffer
// events (SubscribeBuffered for a listener whose events carry data).
func (b *Bus) Subscribe(channel string) (<-chan BusEvent, func()) {
	return b.SubscribeBuffered(channel, busBuffer)
}

// SubscribeBuffered is Subscribe with a buffer of n events (at least
// busBuffer): for a listener that must not lose events in a burst because
// they carry what it would otherwise read from Redis (the engine's
// work-events listener: a report's message holds the group's next
// snapshot, and go-redis hands over a socket's worth of messages at once).
func (b *Bus) SubscribeBuffered(channel string, n int) (<-chan BusEvent, func()) {
	l := &busListener{ch: make(chan BusEvent, max(n, busBuffer))}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs[channel] == nil {
		b.subs[channel] = map[*busListener]struct{}{}
	}
	b.subs[channel][l] = struct{}{}
	if b.ps == nil {
		ctx, cancel := context.WithCancel(context.Background())
		b.ps, b.stop, b.done = b.client.Subscribe(ctx), cancel, make(chan struct{}) // connects on first use
		go b.run(ctx, b.ps, b.done)
	}
	// SUBSCRIBE even if another listener has the channel already: Redis
	// confirms it again, which is this listener's Subscribed event. A
	// failure is retried by go-redis's resubscription when the receive
	// loop reconnects (the channel is recorded either way). Under b.mu, so
	// that it cannot cross an UNSUBSCRIBE of the same channel by remove.
	if err := b.ps.Subscribe(context.Background(), channel); err != nil {
		b.log.Warn("pub/sub subscribe failed; retried on reconnect", "channel", channel, "err", err)
	}
	var once sync.Once
	return l.ch, func() { once.Do(func() { b.remove(channel, l) }) }
}

// remove drops listener l of channel; the last listener of a channel
// unsubscribes it, the last listener of all closes the connection.
func (b *Bus) remove(channel string, l *busListener) {
	b.mu.Lock()
	delete(b.subs[channel], l)
	if len(b.subs[channel]) > 0 || b.ps == nil {
		b.mu.Unlock()
		return
	}
	delete(b.subs, channel)
	if len(b.subs) > 0 {
		if err := b.ps.Unsubscribe(context.Background(), channel); err != nil {
			b.log.Debug("pub/sub unsubscribe failed", "channel", channel, "err", err)
		}
		b.mu.Unlock()
		return
	}
	ps, stop, done := b.ps, b.stop, b.done
	b.ps, b.stop, b.done = nil, nil, nil
	b.mu.Unlock()
	stop()
	_ = ps.Close() // go-redis does not interrupt a blocking read on ctx; Close does
	<-done         // outside b.mu: the loop may be delivering
}

// run receives on ps until ctx ends, delivering to the listeners.
func (b *Bus) run(ctx context.Context, ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	fails := 0
	for {
		msg, err := ps.ReceiveTimeout(ctx, busPing)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if perr := ps.Ping(ctx); perr != nil && ctx.Err() == nil {
					b.log.Warn("pub/sub ping failed; reconnecting", "err", perr)
				}
				continue
			}
			// go-redis reconnects and resubscribes on the next receive.
			fails++
			if fails == 3 {
				b.log.Warn("pub/sub connection failing; retrying", "err", err)
			}
			if !Sleep(ctx, min(time.Duration(fails)*100*time.Millisecond, 2*time.Second)) {
				return
			}
			continue
		}
		if fails >= 3 {
			b.log.Info("pub/sub connection back")
		}
		fails = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.deliver(m.Channel, BusEvent{Subscribed: true})
			}
		case *redis.Message:
			b.deliver(m.Channel, BusEvent{Payload: m.Payload})
		}
	}
}

func (b *Bus) deliver(channel string, ev BusEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.subs[channel] {
		select {
		case l.ch <- ev:
		default: // full: the listener has wake-ups pending already
		}
	}
}
