// Package worker executes runs: an application's own worker (New, Handle,
// Run) and `wasmsched worker` (the Exec and Simulate handlers) are the
// same code. A Worker registers a fixed number of slots under a fresh
// identity, heartbeats, executes each run whose task 0 is assigned to one
// of its slots exactly once per assignment token with the handler of the
// run's group, ends a handler's context on a stop, a timeout or a drain,
// and reports every outcome (and the result) under its token. When Run's
// context ends it drains: no new runs, the runs in flight finish within
// DrainTimeout, the rest are interrupted, then it deregisters. A worker
// whose heartbeat cannot be written for longer than its TTL stops the runs
// it executes and reports them FAILED (LostContactReason): the leader may
// have reaped it. It imports
// storage only: a worker needs no policy runtime and no leadership.
package worker
