package client

import (
	"context"
	"fmt"

	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// WatchOptions select what a Watch follows: one run, one group's runs,
// or (both empty) every run of the namespace.
type WatchOptions struct {
	Run   string
	Group string
}

// Event is one state change of a run: State is the state the run entered,
// Run the record as read right after (it may have moved on already: a
// launch and its slots are often one after the other). Missed (with a
// zero Run) says changes may have been lost (the watch fell behind or its
// connection dropped and came back): re-read what you follow. A run watch
// re-reads its run by itself and never reports Missed.
type Event struct {
	Run    Run    `json:"run"`
	State  string `json:"state"`
	Missed bool   `json:"missed"`
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
		if err := limits.ValidateName("run", o.Run); err != nil {
			return nil, err
		}
	}
	if o.Group != "" {
		if err := limits.ValidateName("group", o.Group); err != nil {
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
		if !send(Event{Run: *first, State: first.State}) || first.Final() {
			return
		}
		last = first.State
	}
	for b := range rw.C {
		var evs []storage.RunEvent
		for _, ev := range b.Events {
			if (o.Run == "" || ev.Run == o.Run) && (o.Group == "" || ev.Group == o.Group) {
				evs = append(evs, ev)
			}
		}
		if b.Missed {
			if o.Run == "" {
				if !send(Event{Missed: true}) {
					return
				}
			} else if len(evs) == 0 {
				evs = []storage.RunEvent{{Run: o.Run}} // re-read it: what did we miss?
			}
		}
		for len(evs) > 0 {
			n := min(len(evs), storage.MaxGetRuns)
			part := evs[:n]
			evs = evs[n:]
			ids := make([]string, len(part))
			for i, ev := range part {
				ids[i] = ev.Run
			}
			rs, err := c.st.GetRuns(ctx, ids)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !send(Event{Missed: true}) {
					return
				}
				continue
			}
			byID := make(map[string]Run, len(rs))
			for _, r := range rs {
				byID[r.ID] = runOf(r)
			}
			for _, ev := range part {
				v, ok := byID[ev.Run]
				if !ok {
					continue // gone (retention) since the event
				}
				state := string(ev.State)
				if o.Run != "" {
					if v.State == last {
						continue // a re-read after a gap, or an older event: nothing new
					}
					last, state = v.State, v.State
				}
				if !send(Event{Run: v, State: state}) {
					return
				}
				if o.Run != "" && v.Final() {
					return
				}
			}
		}
	}
}
