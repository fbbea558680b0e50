// Package client is the Go API applications use to submit and follow
// runs: Submit (with an idempotency key), Get, List (cursor pages), Stop,
// Watch (a run's or a group's state changes, pushed by the engine's run
// events, no polling), and a group's settings.
//
// A Client talks to the namespace's Redis directly, through the same
// atomic scripts the CLI and the engine use; it needs no wasmsched process
// beyond a leader (`wasmsched serve` or `dev`) to decide the runs it
// submits. Every call takes a context; errors are the sentinel errors
// below, checked with errors.Is.
//
//	c, err := client.New(ctx, client.Config{Redis: "redis://127.0.0.1:6379/0"})
//	run, err := c.Submit(ctx, "nightly", client.SubmitOptions{IdempotencyKey: "build-4711"})
//	w, err := c.Watch(ctx, client.WatchOptions{Run: run.ID})
//	for ev := range w.C { ... ev.Run.State ... }
package client
