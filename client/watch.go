package client

import (
	"context"
	"fmt"

	"github.com/wasmsched/wasmsched/storage"
)

// WatchOptions select what a Watch follows: one run, one group's runs,
// or (both empty) every run of the namespace.
type WatchOptions struct {
	Run   string
	Group string
}

// Event is a run as it was right after a state change. Missed (with a
// zero Run) says changes may have been lost (the watch fell behind or
// reconnected): re-read what you follow. A run watch re-reads its run by
// itself and never reports Missed.
type Event struct {
	Run    Run
	Missed bool
}

// Watch follows run state changes (Client.Watch).
type Watch struct {
	C <-chan Event // closed when the watch ends

	w *storage.RunWatch
}

// Close ends the watch.
func (w *Watch) Close() error { return w.w.Close() }

// Watch follows state changes as the engine's scripts announce them (no
// polling). A run watch first delivers the run as it is, then each change,
// and ends (C closed) after the run's final state. A group or namespace
// watch delivers each change from now on, until Close or ctx ends.
func (c *Client) Watch(ctx context.Context, o WatchOptions) (*Watch, error) {
	if o.Run != "" && o.Group != "" {
		return nil, fmt.Errorf("client: watch: give a run or a group, not both: %w", ErrInvalid)
	}
	if o.Run != "" {
		if err := storage.ValidateName("run", o.Run); err != nil {
			return nil, err
		}
	}
	if o.Group != "" {
		if err := storage.ValidateName("group", o.Group); err != nil {
			return nil, err
		}
	}
	rw, err := c.st.WatchRuns(ctx) // subscribed: nothing after this is lost
	if err != nil {
		return nil, err
	}
	var first *Run
	if o.Run != "" {
		r, err := c.Get(ctx, o.Run)
		if err != nil {
			_ = rw.Close()
			return nil, err
		}
		first = &r
	}
	ch := make(chan Event, 64)
	go c.watchLoop(ctx, rw, o, first, ch)
	return &Watch{C: ch, w: rw}, nil
}

func (c *Client) watchLoop(ctx context.Context, rw *storage.RunWatch, o WatchOptions, first *Run, ch chan<- Event) {
	defer close(ch)
	defer rw.Close()
	send := func(ev Event) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	last := ""
	if first != nil {
		if !send(Event{Run: *first}) || first.Final() {
			return
		}
		last = first.State
	}
	for b := range rw.C {
		var ids []string
		for _, ev := range b.Events {
			if (o.Run == "" || ev.Run == o.Run) && (o.Group == "" || ev.Group == o.Group) {
				ids = append(ids, ev.Run)
			}
		}
		if b.Missed {
			if o.Run == "" {
				if !send(Event{Missed: true}) {
					return
				}
			} else {
				ids = []string{o.Run}
			}
		}
		for len(ids) > 0 {
			n := min(len(ids), storage.MaxGetRuns)
			rs, err := c.st.GetRuns(ctx, ids[:n])
			ids = ids[n:]
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !send(Event{Missed: true}) {
					return
				}
				continue
			}
			for _, r := range rs {
				v := FromStorage(r)
				if o.Run != "" {
					if v.State == last {
						continue // a re-read after a gap, nothing new
					}
					last = v.State
				}
				if !send(Event{Run: v}) {
					return
				}
				if o.Run != "" && v.Final() {
					return
				}
			}
		}
	}
}
