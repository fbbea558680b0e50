package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"

	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/storage"
)

// LeaderTask is work a host does only while it leads a namespace. It runs
// concurrently with the other leader tasks of the term and must return soon
// after ctx is cancelled. It must check lease.Valid() before every apply and
// pass lease.Fence() to every fenced write. Returning a non-nil error (for
// example storage.ErrFenced) ends the term: the host demotes itself at once.
// Returning nil ends only this task.
type LeaderTask func(ctx context.Context, lease *Lease) error

// Task is a named LeaderTask.
type Task struct {
	Name string
	Run  LeaderTask
}

// Elector runs the leadership loop of one namespace: obtain -> lead ->
// drain -> stand by, all in the goroutine that calls Run, so leadership
// changes are serialised and one Elector never runs two task sets at once.
type Elector struct {
	ns       string
	identity string
	store    *storage.Store
	bus      *Bus // leader-events subscription (bus.go)
	locker   *redislock.Client
	key      string
	ttl      time.Duration
	refresh  time.Duration
	retry    time.Duration
	margin   time.Duration
	log      *slog.Logger
	now      func() time.Time
	onChange func(leading bool, epoch int64, reason string)

	mu    sync.Mutex
	tasks []Task
	lease *Lease // current term, nil while standing by

	holdUntil atomic.Int64 // unix ns: do not campaign before (Resign, multi.go)
	// Set before Run by Multi (multi.go): beginCampaign reports whether the
	// process is reluctant (it then waits a retry more before campaigning)
	// and counts this campaign in flight until endCampaign, which runs once
	// the campaign failed or its lease is visible in Leading.
	beginCampaign func() (reluctant bool)
	endCampaign   func()

	active    atomic.Int32 // task sets running now (0 or 1)
	maxActive atomic.Int32 // high-water mark of active
	terms     atomic.Int64 // promotions so far
}

// Config configures an Elector (the host fills every field; see host.Config).
type Config struct {
	Namespace string
	Identity  string
	Store     *storage.Store
	Bus       *Bus
	TTL       time.Duration
	Refresh   time.Duration
	Retry     time.Duration
	Margin    time.Duration
	Log       *slog.Logger
	// OnChange is called on every promotion and demotion.
	OnChange func(leading bool, epoch int64, reason string)
}

// New returns an Elector for c.Namespace's leader lock.
func New(c Config) *Elector {
	return &Elector{
		ns: c.Namespace, identity: c.Identity, store: c.Store, bus: c.Bus,
		locker: c.Store.Locker(), key: keyspace.Of(c.Store).Lock(),
		ttl: c.TTL, refresh: c.Refresh, retry: c.Retry, margin: c.Margin,
		log: c.Log, now: time.Now, onChange: c.OnChange,
	}
}

// SetCampaignHooks is for a multi-namespace process, before Run: begin
// reports whether the process is reluctant (it then waits a retry more
// before campaigning) and counts the campaign in flight until end, which
// runs once the campaign failed or its lease is visible in Leading.
func (e *Elector) SetCampaignHooks(begin func() (reluctant bool), end func()) {
	e.beginCampaign, e.endCampaign = begin, end
}

// AddLeaderTask registers a task for every future term (a term already
// running is not changed).
func (e *Elector) AddLeaderTask(name string, fn LeaderTask) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tasks = append(e.tasks, Task{Name: name, Run: fn})
}

// Lease returns the current term's lease, or nil while standing by.
func (e *Elector) Lease() *Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease
}

// Leading reports whether this elector holds a valid lease now.
func (e *Elector) Leading() bool {
	l := e.Lease()
	return l != nil && l.Valid()
}

// ActiveLoops is the number of leader task sets running now, maintained by
// the loop itself (incremented before the first task starts, decremented
// after the last one returned). It is never more than 1.
func (e *Elector) ActiveLoops() int { return int(e.active.Load()) }

// MaxActiveLoops is the highest ActiveLoops ever observed.
func (e *Elector) MaxActiveLoops() int { return int(e.maxActive.Load()) }

// TermCount is the number of times this elector became leader.
func (e *Elector) TermCount() int64 { return e.terms.Load() }

// Identity is the stamp this elector competes with.
func (e *Elector) Identity() string { return e.identity }

// Run competes for leadership until ctx is cancelled. On return no leader
// task is running and, if it was leading, the lock has been released.
func (e *Elector) Run(ctx context.Context) error {
	// A leader that releases the lock publishes on the leader-events
	// channel: standbys wake up and compete at once.
	wake := make(chan struct{}, 1)
	events, unsubscribe := e.bus.Subscribe(keyspace.Of(e.store).LeaderEvents())
	defer unsubscribe()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-events: // a release, or a (re)subscription: campaign now
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	}()

	standbyLogged := false
	for ctx.Err() == nil {
		if !e.holdoff(ctx) { // multi.go: after a balancing Resign
			break
		}
		if !e.admit(ctx) { // multi.go: reluctance, campaigns in flight
			break
		}
		lock, lease, wait := e.campaign(ctx, !standbyLogged)
		if lease == nil {
			e.campaignEnded()
			standbyLogged = true
			if !sleepWake(ctx, wait, wake) {
				break
			}
			continue
		}
		standbyLogged = false
		reason := e.lead(ctx, lock, lease)
		e.release(lock, reason)
		if ctx.Err() == nil {
			// Compete again after a pause, so a standby gets its chance
			// when we renounced because of a failing task.
			Sleep(ctx, jitter(e.retry))
		}
		// Drop a wake-up caused by our own release.
		select {
		case <-wake:
		default:
		}
	}
	return nil
}

// campaign tries once to obtain the lock and become leader. Without a
// lease, it returns how long to wait before the next attempt: the retry
// interval (jittered), or less if the holder's lock expires sooner.
func (e *Elector) campaign(ctx context.Context, logStandby bool) (*redislock.Lock, *Lease, time.Duration) {
	wait := jitter(e.retry)
	sent := e.now()
	octx, cancel := context.WithTimeout(ctx, e.ttl)
	lock, err := e.locker.Obtain(octx, e.key, e.ttl, &redislock.Options{Token: e.identity})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, wait
		}
		if errors.Is(err, redislock.ErrNotObtained) {
			// Try again right when the holder's lock runs out (a
			// kill -9'd leader), if that is sooner than the retry.
			if pttl, held, err := e.store.LockTTL(ctx); err == nil && held && pttl > 0 && pttl < wait {
				wait = pttl + time.Duration(rand.Int64N(int64(5*time.Millisecond)))
			}
			if logStandby {
				holder := ""
				if li, err := e.store.Leader(ctx); err == nil {
					holder = li.Identity
				}
				if holder == "" {
					// The holder obtained the lock but has not yet recorded
					// itself in the fence (its BecomeLeader is in flight):
					// the lock's value is its identity stamp.
					holder, _ = e.store.LockHolder(ctx)
				}
				e.log.Info("standing by", "leader", holder)
			}
		} else {
			e.log.Warn("obtain leader lock failed", "err", err)
		}
		return nil, nil, wait
	}
	epoch, err := e.store.BecomeLeader(ctx, e.identity)
	if err != nil {
		e.log.Warn("become leader failed; standing by", "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.ttl)
		_ = lock.Release(rctx)
		cancel()
		return nil, nil, wait
	}
	lease := NewLease(storage.Fence{Epoch: epoch, Holder: e.identity}, sent.Add(e.ttl-e.margin), e.now)
	if !lease.Valid() {
		// Obtaining took longer than the lease: do not start a term.
		e.log.Warn("lease ran out while becoming leader; standing by", "epoch", epoch)
		e.release(lock, "lease ran out while becoming leader")
		return nil, nil, wait
	}
	return lock, lease, 0
}

type taskDone struct {
	name string
	err  error
}

// lead runs one term: the tasks, the refresh loop, then the drain. It
// returns why the term ended.
func (e *Elector) lead(ctx context.Context, lock *redislock.Lock, lease *Lease) string {
	e.mu.Lock()
	tasks := append([]Task(nil), e.tasks...)
	e.lease = lease
	e.mu.Unlock()
	e.campaignEnded() // the lease is visible in Leading from here on
	e.terms.Add(1)
	e.log.Info("became leader", "identity", e.identity, "epoch", lease.Epoch(), "lease_ttl", e.ttl)
	if e.onChange != nil {
		e.onChange(true, lease.Epoch(), "")
	}

	tctx, cancel := context.WithCancel(ctx)
	n := e.active.Add(1)
	for {
		m := e.maxActive.Load()
		if n <= m || e.maxActive.CompareAndSwap(m, n) {
			break
		}
	}
	var wg sync.WaitGroup
	done := make(chan taskDone, len(tasks))
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runTask(tctx, t, lease)
			if err != nil && tctx.Err() == nil {
				// Stop deciding at once, before the loop even wakes up.
				lease.Revoke(taskReason(t.Name, err))
			}
			done <- taskDone{t.Name, err}
		}()
	}

	reason := e.hold(ctx, lock, lease, done)
	lease.Revoke(reason) // Valid() is false from here on
	// Say so now, not after the drain: the tasks may wait on Redis calls
	// for a while, and a standby may lead meanwhile (issue 29: the
	// deposed leader's line came up to 4.8 s after the new one's).
	if ctx.Err() != nil {
		e.log.Info("renouncing leadership", "epoch", lease.Epoch(), "reason", reason)
	} else {
		e.log.Warn("lost leadership", "epoch", lease.Epoch(), "reason", reason)
	}
	if e.onChange != nil {
		e.onChange(false, lease.Epoch(), reason)
	}
	drainStart := e.now()
	cancel()
	wg.Wait()
	e.active.Add(-1)

	e.mu.Lock()
	e.lease = nil
	e.mu.Unlock()
	e.log.Debug("leader tasks drained", "epoch", lease.Epoch(), "took", e.now().Sub(drainStart))
	return reason
}

// hold refreshes the lock every refresh interval until the term ends. A
// refresh runs in its own goroutine, so a refresh stuck on a slow or cut
// link never hides the lease's end: the term ends at the local deadline
// (go-redis does not end a call at its context's deadline unless the
// client enables it), not when the call gives up.
func (e *Elector) hold(ctx context.Context, lock *redislock.Lock, lease *Lease, done <-chan taskDone) string {
	ticker := time.NewTicker(e.refresh)
	defer ticker.Stop()
	expiry := time.NewTimer(time.Until(lease.Deadline()))
	defer expiry.Stop()
	type refreshed struct {
		sent time.Time
		err  error
	}
	results := make(chan refreshed, 1)
	inFlight := false
	for {
		select {
		case <-ctx.Done():
			return "shutdown"
		case <-lease.Done():
			return lease.Reason()
		case d := <-done:
			if d.err != nil {
				return taskReason(d.name, d.err)
			}
			e.log.Debug("leader task finished", "task", d.name)
		case <-expiry.C:
			if !lease.Valid() {
				return "lease ran out locally (no successful refresh in time)"
			}
			expiry.Reset(time.Until(lease.Deadline()))
		case <-ticker.C:
			if !lease.Valid() {
				return "lease ran out locally (no successful refresh in time)"
			}
			if inFlight {
				continue // the last refresh has not answered yet
			}
			inFlight = true
			sent := e.now()
			rctx, rcancel := context.WithDeadline(ctx, lease.Deadline())
			go func() {
				defer rcancel()
				results <- refreshed{sent, lock.Refresh(rctx, e.ttl, nil)}
			}()
		case r := <-results:
			inFlight = false
			switch {
			case r.err == nil:
				if lease.extend(r.sent.Add(e.ttl - e.margin)) {
					expiry.Reset(time.Until(lease.Deadline()))
				}
			case ctx.Err() != nil:
				return "shutdown"
			case errors.Is(r.err, redislock.ErrNotObtained):
				return "lock lost: it no longer holds our identity (expired or taken over)"
			default:
				return fmt.Sprintf("lock refresh failed: %v", r.err)
			}
		}
	}
}

// release gives the lock back (compare-and-delete, so it never deletes a
// successor's lock) so that a standby takes over without waiting for the TTL.
func (e *Elector) release(lock *redislock.Lock, reason string) {
	if lock == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.ttl)
	defer cancel()
	switch err := lock.Release(ctx); {
	case err == nil:
		e.log.Info("leader lock released", "reason", reason)
		if err := e.store.AnnounceRelease(ctx, e.identity); err != nil {
			e.log.Warn("publish lock release failed", "err", err)
		}
	case errors.Is(err, redislock.ErrLockNotHeld):
		e.log.Debug("leader lock was no longer ours", "reason", reason)
	default:
		e.log.Warn("release leader lock failed", "err", err)
	}
}

func taskReason(name string, err error) string {
	if errors.Is(err, storage.ErrFenced) {
		return fmt.Sprintf("fenced: task %s: %v", name, err)
	}
	return fmt.Sprintf("task %s failed: %v", name, err)
}

// runTask runs t, turning a panic into an error.
func runTask(ctx context.Context, t Task, lease *Lease) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return t.Run(ctx, lease)
}

// jitter returns d scaled by a random factor in [0.75, 1.25).
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// sleepWake sleeps d or until woken; it reports false if ctx ended first.
func sleepWake(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}

// Sleep sleeps d; it reports false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Resign ends the current term (if any) at once with reason (the lock is
// released gracefully and a standby takes over) and keeps this elector
// from competing for holdoff, unless the lock stays free: after two retry
// intervals without a leader it competes again. It reports whether a term
// was ended.
func (e *Elector) Resign(reason string, holdoff time.Duration) bool {
	e.holdUntil.Store(time.Now().Add(holdoff).UnixNano())
	l := e.Lease()
	if l == nil {
		return false
	}
	return l.Revoke(reason)
}

// holdoff waits out a Resign's holdoff (and, for a reluctant Multi member,
// one more retry interval) before a campaign. It reports false if ctx ended.
func (e *Elector) holdoff(ctx context.Context) bool {
	since := time.Now()
	for {
		until := e.holdUntil.Load()
		now := time.Now()
		if until <= now.UnixNano() {
			break
		}
		if !Sleep(ctx, min(time.Duration(until-now.UnixNano()), e.retry)) {
			return false
		}
		if time.Since(since) >= 2*e.retry {
			// Nobody took the namespace: stop holding off.
			if holder, err := e.store.LockHolder(ctx); err == nil && holder == "" {
				e.holdUntil.Store(0)
				e.log.Info("holdoff ended early: namespace has no leader")
			}
		}
	}
	return true
}

// admit counts a campaign in flight for a Multi member and, when the
// process is reluctant, waits one more retry interval first. It reports
// false if ctx ended (the campaign is then not counted).
func (e *Elector) admit(ctx context.Context) bool {
	if e.beginCampaign == nil {
		return true
	}
	if e.beginCampaign() && !Sleep(ctx, jitter(e.retry)) {
		e.campaignEnded()
		return false
	}
	return true
}

// campaignEnded ends what admit counted.
func (e *Elector) campaignEnded() {
	if e.endCampaign != nil {
		e.endCampaign()
	}
}
