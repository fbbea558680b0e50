package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// Event streams: every /events request of a namespace is fed by ONE hub
// (one Redis subscription, one re-read of the changed runs per batch),
// so 100 viewers cost the engine what one does. Each stream has a bounded
// buffer; a stream that falls behind gets "event: missed" and re-reads.

const (
	streamBuffer = 256              // frames buffered per stream
	pingEvery    = 15 * time.Second // a comment line keeps proxies from closing idle streams
)

type stream struct {
	ch         chan []byte
	group, run string
	missed     chan struct{} // 1-buffered: a drop happened
}

type hub struct {
	ns     string
	st     *storage.Store
	subs   map[*stream]struct{}
	cancel context.CancelFunc
	ready  chan error // the subscription is up (nil) or failed
}

type hubs struct {
	s      *Server
	mu     sync.Mutex
	m      map[string]*hub
	n      int // open streams
	closed bool
	wg     sync.WaitGroup
	stop   chan struct{}
}

func newHubs(s *Server) *hubs { return &hubs{s: s, m: map[string]*hub{}, stop: make(chan struct{})} }

func (h *hubs) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.stop)
	for _, hb := range h.m {
		hb.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// join adds a stream to ns's hub, starting the hub if it is the first.
func (h *hubs) join(st *storage.Store, sub *stream) (func(), error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, "unavailable", "the server is shutting down")
	}
	if h.n >= maxEventStreams {
		h.mu.Unlock()
		return nil, errorf(http.StatusServiceUnavailable, "unavailable", "%d event streams open, the most this server allows", maxEventStreams)
	}
	ns := st.Namespace()
	hb := h.m[ns]
	if hb == nil {
		ctx, cancel := context.WithCancel(context.Background())
		hb = &hub{ns: ns, st: st, subs: map[*stream]struct{}{}, cancel: cancel, ready: make(chan error, 1)}
		h.m[ns] = hb
		h.wg.Add(1)
		go h.run(ctx, hb)
	}
	hb.subs[sub] = struct{}{}
	h.n++
	ready := hb.ready
	h.mu.Unlock()
	leave := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := hb.subs[sub]; !ok {
			return
		}
		delete(hb.subs, sub)
		h.n--
		if len(hb.subs) == 0 && h.m[ns] == hb {
			delete(h.m, ns)
			hb.cancel()
		}
	}
	select {
	case err := <-ready:
		hb.ready <- err // for the next joiner
		if err != nil {
			leave()
			return nil, err
		}
	case <-time.After(10 * time.Second):
		leave()
		return nil, errorf(http.StatusServiceUnavailable, "unavailable", "the event subscription did not start")
	}
	return leave, nil
}

func (h *hubs) run(ctx context.Context, hb *hub) {
	defer h.wg.Done()
	c, err := client.NewFromRedis(hb.st.Redis(), hb.ns)
	var w *client.Watch
	if err == nil {
		w, err = c.Watch(ctx, client.WatchOptions{}) // subscribed when it returns
	}
	hb.ready <- err
	if err != nil {
		h.mu.Lock()
		if h.m[hb.ns] == hb {
			delete(h.m, hb.ns)
		}
		h.mu.Unlock()
		return
	}
	defer w.Close()
	for ev := range w.C {
		if ev.Missed {
			h.broadcastMissed(hb)
			continue
		}
		// encode once (the event record: the state entered and the run),
		// then hand the frame to every stream under one lock
		r := ev.Run
		data, _ := json.Marshal(ev)
		frame := []byte(fmt.Sprintf("event: run\ndata: %s\n\n", data))
		h.mu.Lock()
		for sub := range hb.subs {
			if (sub.group != "" && sub.group != r.Group) || (sub.run != "" && sub.run != r.ID) {
				continue
			}
			select {
			case sub.ch <- frame:
			default:
				select {
				case sub.missed <- struct{}{}:
				default:
				}
			}
		}
		h.mu.Unlock()
	}
}

func (h *hubs) broadcastMissed(hb *hub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range hb.subs {
		select {
		case sub.missed <- struct{}{}:
		default:
		}
	}
}

// events streams run changes as server-sent events: "event: run" with a
// run's JSON after each change (filters ?group= and ?run=), "event:
// missed" when changes were dropped (re-read), a comment every 15 s.
func (s *Server) events(w http.ResponseWriter, r *http.Request, c *call) (int, any, error) {
	q := r.URL.Query()
	sub := &stream{ch: make(chan []byte, streamBuffer), group: q.Get("group"), run: q.Get("run"), missed: make(chan struct{}, 1)}
	if sub.group != "" {
		if err := limits.ValidateName("group", sub.group); err != nil {
			return 0, nil, err
		}
	}
	if sub.run != "" {
		if err := limits.ValidateName("run", sub.run); err != nil {
			return 0, nil, err
		}
	}
	leave, err := s.hubs.join(c.st, sub)
	if err != nil {
		return 0, nil, err
	}
	defer leave()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, ": subscribed\n\n"); err != nil {
		return 0, nil, nil
	}
	_ = rc.Flush()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		var frame []byte
		select {
		case <-r.Context().Done():
			return 0, nil, nil
		case <-s.hubs.stop:
			return 0, nil, nil
		case <-ping.C:
			frame = []byte(": ping\n\n")
		case <-sub.missed:
			frame = []byte("event: missed\ndata: {}\n\n")
		case frame = <-sub.ch:
		}
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a stalled reader is dropped
		if _, err := w.Write(frame); err != nil {
			return 0, nil, nil
		}
		// what else is queued goes out with it: one flush per burst, not per run
	more:
		for n := 0; n < streamBuffer; n++ {
			select {
			case f := <-sub.ch:
				if _, err := w.Write(f); err != nil {
					return 0, nil, nil
				}
			default:
				break more
			}
		}
		if err := rc.Flush(); err != nil {
			return 0, nil, nil
		}
		_ = rc.SetWriteDeadline(time.Time{})
	}
}
