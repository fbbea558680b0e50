package policies

import (
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
)

// ring keeps the first max/4 bytes written to it and the last 3*max/4 (the
// guest's stdout+stderr): a Go panic message comes first and a goroutine
// dump after it, and both ends matter.
type ring struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte
	lost  bool
	fired *atomic.Bool // the instance's deadline flag; nil: never
	dirty atomic.Bool  // written since the last Reset (most calls write nothing)
}

// errDeadline fails the guest's WASI writes and random reads once its call
// deadline has passed, so that one WASI call with a huge vector of buffers
// ends at its next buffer instead of running on.
var errDeadline = errors.New("call deadline exceeded")

func (r *ring) Write(p []byte) (int, error) {
	if r.fired != nil && r.fired.Load() {
		return 0, errDeadline
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty.Store(true)
	n := len(p)
	hmax := r.max / 4
	if room := hmax - len(r.head); room > 0 {
		k := min(room, len(p))
		r.head = append(r.head, p[:k]...)
		p = p[k:]
	}
	tmax := r.max - hmax
	if len(p) >= tmax {
		r.lost = r.lost || len(p) > tmax || len(r.tail) > 0
		r.tail = append(r.tail[:0], p[len(p)-tmax:]...)
		return n, nil
	}
	if over := len(r.tail) + len(p) - tmax; over > 0 {
		r.tail = append(r.tail[:0], r.tail[over:]...)
		r.lost = true
	}
	r.tail = append(r.tail, p...)
	return n, nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost {
		return string(r.head) + "\n...\n" + string(r.tail)
	}
	return string(r.head) + string(r.tail)
}

func (r *ring) Reset() {
	if !r.dirty.Load() {
		return
	}
	r.mu.Lock()
	r.head, r.tail, r.lost = r.head[:0], r.tail[:0], false
	r.dirty.Store(false)
	r.mu.Unlock()
}

// randChunk bounds one read of the guest's random source between two
// deadline checks.
const randChunk = 64 << 10

// guardedRand is the guest's random source (WASI random_get): crypto/rand
// in chunks of randChunk, failing once the call deadline has passed, so a
// random_get of the whole guest memory ends soon after the deadline.
type guardedRand struct{ fired *atomic.Bool }

func (g guardedRand) Read(p []byte) (int, error) {
	if g.fired.Load() {
		return 0, errDeadline
	}
	return rand.Read(p[:min(len(p), randChunk)])
}
