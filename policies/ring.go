package policies

import "sync"

// ring keeps the first max/4 bytes written to it and the last 3*max/4 (the
// guest's stdout+stderr): a Go panic message comes first and a goroutine
// dump after it, and both ends matter.
type ring struct {
	mu   sync.Mutex
	max  int
	head []byte
	tail []byte
	lost bool
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
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
	r.mu.Lock()
	r.head, r.tail, r.lost = r.head[:0], r.tail[:0], false
	r.mu.Unlock()
}
