package policies

import "sync"

// ring keeps the last max bytes written to it (the guest's stdout+stderr).
type ring struct {
	mu   sync.Mutex
	buf  []byte
	max  int
	lost bool
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= r.max {
		p = p[len(p)-r.max:]
		r.buf = r.buf[:0]
		r.lost = true
	}
	if over := len(r.buf) + len(p) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
		r.lost = true
	}
	r.buf = append(r.buf, p...)
	return n, nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost {
		return "..." + string(r.buf)
	}
	return string(r.buf)
}

func (r *ring) Reset() {
	r.mu.Lock()
	r.buf, r.lost = r.buf[:0], false
	r.mu.Unlock()
}
