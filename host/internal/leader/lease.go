package leader

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// ErrLeaseLost is returned (wrapped, with the reason) by Lease.Err once the
// lease is no longer valid.
var ErrLeaseLost = errors.New("leader lease lost")

// Lease is one term of leadership of one namespace, handed to every leader
// task. It carries the fence (epoch, holder) every leader-authority write
// must present, and answers Valid() — which a task must check before every
// apply. A Lease never becomes valid again once invalid: the next term gets
// a new Lease (and a higher epoch).
type Lease struct {
	fence storage.Fence
	now   func() time.Time

	mu       sync.Mutex
	deadline time.Time // last successful obtain/refresh sent + TTL - margin
	reason   string    // why the lease ended; "" while not revoked
	done     chan struct{}
}

func NewLease(f storage.Fence, deadline time.Time, now func() time.Time) *Lease {
	if now == nil {
		now = time.Now
	}
	return &Lease{fence: f, now: now, deadline: deadline, done: make(chan struct{})}
}

// Fence returns the (epoch, holder) to pass to every fenced write.
func (l *Lease) Fence() storage.Fence { return l.fence }

// Epoch is the fencing epoch of this term.
func (l *Lease) Epoch() int64 { return l.fence.Epoch }

// Valid reports whether the lease still holds: not revoked and the local
// deadline not passed. Check it before every apply.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason == "" && l.now().Before(l.deadline)
}

// Deadline is the local lease deadline: when the last successful
// obtain/refresh was sent, plus the TTL, minus the safety margin.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done is closed when the lease is revoked (loss detected, deadline passed
// as observed by the elector, a task failed, or shutdown).
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lease is valid, else ErrLeaseLost with the reason.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.reason != "":
		return fmt.Errorf("%w: %s", ErrLeaseLost, l.reason)
	case !l.now().Before(l.deadline):
		return fmt.Errorf("%w: local deadline passed", ErrLeaseLost)
	}
	return nil
}

// extend moves the deadline forward (never back) unless revoked. It reports
// whether the lease is still live.
func (l *Lease) extend(deadline time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reason != "" {
		return false
	}
	if deadline.After(l.deadline) {
		l.deadline = deadline
	}
	return true
}

// Revoke ends the lease at once; the first reason wins. It reports whether
// this call revoked it.
func (l *Lease) Revoke(reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reason != "" {
		return false
	}
	if reason == "" {
		reason = "revoked"
	}
	l.reason = reason
	close(l.done)
	return true
}

// Reason is why the lease ended ("" while not revoked).
func (l *Lease) Reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}
