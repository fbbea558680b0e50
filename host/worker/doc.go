// Package worker is the worker agent (`wasmsched worker`): it registers a
// fixed number of slots under a fresh identity, heartbeats, executes each
// run whose task 0 is assigned to one of its slots exactly once per
// assignment token (simulated, or a program in its own process group), obeys
// stop requests and reports every outcome under its token. It imports
// storage only: a worker needs no policy runtime and no leadership.
package worker
