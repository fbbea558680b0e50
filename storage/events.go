package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RunEvent is one run's state change as a script announced it on
// Keys.RunEvents: the run, its group and the state it entered.
type RunEvent struct {
	Run   string
	Group string
	State State
}

// ParseRunEvents parses a Keys.RunEvents payload, space-separated
// "STATE#group#id" (names never hold '#' or whitespace: ValidateName).
// Malformed entries are skipped.
func ParseRunEvents(payload string) []RunEvent {
	var out []RunEvent
	for _, e := range strings.Fields(payload) {
		st, rest, ok := strings.Cut(e, "#")
		if !ok {
			continue
		}
		g, id, ok := strings.Cut(rest, "#")
		if !ok || g == "" || id == "" || st == "" {
			continue
		}
		out = append(out, RunEvent{Run: id, Group: g, State: State(st)})
	}
	return out
}

// RunBatch is what one script announced. Missed reports that events may
// have been lost before this batch (the watcher fell behind, or its
// connection dropped and was re-established): a watcher that must not
// miss a change re-reads the runs it follows.
type RunBatch struct {
	Events []RunEvent
	Missed bool
}

// RunWatchBuffer is how many batches a RunWatch holds for a slow reader;
// beyond it batches are dropped and the next one is marked Missed, so a
// stalled reader costs bounded memory and never slows the scripts.
const RunWatchBuffer = 256

// RunWatch follows the namespace's run events (WatchRuns).
type RunWatch struct {
	C <-chan RunBatch // closed when the watch ends (Close, or its context)

	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// WatchRuns subscribes to the namespace's run events and returns once the
// subscription is confirmed: every state change committed after it
// returns is delivered (or reported Missed). The caller reads C and calls
// Close; cancelling ctx ends the watch too.
func (s *Store) WatchRuns(ctx context.Context) (*RunWatch, error) {
	ps := s.c.Subscribe(ctx, s.k.RunEvents())
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("storage: watch runs: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan RunBatch, RunWatchBuffer)
	w := &RunWatch{C: ch, ps: ps, cancel: cancel, done: make(chan struct{})}
	go w.loop(ctx, ch)
	go func() {
		// A blocked Receive does not watch its context: closing the
		// connection ends it.
		<-ctx.Done()
		_ = ps.Close()
	}()
	return w, nil
}

func (w *RunWatch) loop(ctx context.Context, ch chan<- RunBatch) {
	defer close(w.done)
	defer close(ch)
	missed := false
	for {
		m, err := w.ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			// The connection dropped: go-redis reconnects and resubscribes
			// on the next Receive; what was published meanwhile is lost.
			missed = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		msg, ok := m.(*redis.Message)
		if !ok {
			// A (re)subscription confirmation or a pong. After a dropped
			// connection the resubscription says so at once, without
			// waiting for the next event (which may be long in coming).
			if _, resub := m.(*redis.Subscription); resub && missed {
				select {
				case ch <- RunBatch{Missed: true}:
					missed = false
				default:
				}
			}
			continue
		}
		b := RunBatch{Events: ParseRunEvents(msg.Payload), Missed: missed}
		select {
		case ch <- b:
			missed = false
		default:
			missed = true // the reader is behind: drop, and say so next time
		}
	}
}

// Close ends the watch and its connection; C is closed.
func (w *RunWatch) Close() error {
	var err error
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	return err
}
