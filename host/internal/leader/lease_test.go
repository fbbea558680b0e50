package leader

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLeaseValidity(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	f := storage.Fence{Epoch: 7, Holder: "a:1#1#ab"}
	l := NewLease(f, clk.now().Add(time.Second), clk.now)
	if l.Fence() != f || l.Epoch() != 7 {
		t.Fatalf("fence %+v", l.Fence())
	}
	if !l.Valid() || l.Err() != nil {
		t.Fatal("new lease not valid")
	}
	clk.add(999 * time.Millisecond)
	if !l.Valid() {
		t.Fatal("lease invalid before deadline")
	}
	clk.add(time.Millisecond)
	if l.Valid() || !errors.Is(l.Err(), ErrLeaseLost) {
		t.Fatal("lease valid at deadline")
	}
	// Extending after the deadline passed (a late refresh) makes it valid
	// again only if not revoked; the elector never does that, but extend
	// must never move the deadline back.
	if !l.extend(clk.now().Add(500 * time.Millisecond)) {
		t.Fatal("extend refused on an unrevoked lease")
	}
	if !l.Valid() {
		t.Fatal("extended lease invalid")
	}
	d := l.Deadline()
	l.extend(d.Add(-time.Second))
	if l.Deadline() != d {
		t.Fatal("extend moved the deadline back")
	}
	select {
	case <-l.Done():
		t.Fatal("done before revoke")
	default:
	}
}

func TestLeaseRevoke(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := NewLease(storage.Fence{Epoch: 1, Holder: "h"}, clk.now().Add(time.Hour), clk.now)
	if !l.Revoke("lock lost") {
		t.Fatal("first revoke returned false")
	}
	if l.Revoke("second") {
		t.Fatal("second revoke returned true")
	}
	if l.Valid() || l.Reason() != "lock lost" {
		t.Fatalf("valid=%v reason=%q", l.Valid(), l.Reason())
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after revoke")
	}
	if l.extend(clk.now().Add(2 * time.Hour)) {
		t.Fatal("extend revived a revoked lease")
	}
	if l.Valid() {
		t.Fatal("revoked lease valid after extend")
	}
	if err := l.Err(); !errors.Is(err, ErrLeaseLost) || err.Error() != "leader lease lost: lock lost" {
		t.Fatalf("err %v", err)
	}
}
