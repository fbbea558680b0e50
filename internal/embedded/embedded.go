// Package embedded runs the store in-process for `wasmsched dev`, on
// github.com/alicebob/miniredis/v2. The storage scripts run on it unchanged
// and pass the same test suite as real Redis.
package embedded

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Server is an in-process Redis-compatible server.
type Server struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// Start listens on addr ("" = 127.0.0.1:0, a free port). miniredis only
// expires keys when told to, so a goroutine advances its key clock with real
// time every 50ms: key TTLs (the leader lock's lease) run out as on Redis.
func Start(addr string) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("embedded: listen on %s: %w", addr, err)
	}
	s := &Server{m: m, stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return s, nil
}

// Addr is host:port.
func (s *Server) Addr() string { return s.m.Addr() }

// URL is redis://host:port/0.
func (s *Server) URL() string { return "redis://" + s.m.Addr() + "/0" }

// Miniredis exposes the underlying server (tests).
func (s *Server) Miniredis() *miniredis.Miniredis { return s.m }

// Close stops the server. Safe to call twice.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.m.Close()
	})
}
