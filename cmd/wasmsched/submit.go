package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(submitCommand()))
}

func submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit a run to a group",
		ArgsUsage: "G",
		Description: `Submits a WAITING run to group G. A group that does not exist yet is created
with the defaults (policy wait, max_active 1; change them with "group set").
The group's policy decides when the run launches; it then runs on the worker holding
its task 0 once all its --slots task slots are assigned.

--priority is handed to the group's policy as is. None of the built-ins reads
it: wait launches the oldest, discard keeps the oldest, and priority is
DolphinScheduler's "newest wins". For priority order, push the example
examples/oldest-first-by-priority and set it on the group.

--payload is handed to the worker: an exec worker passes it to its program
as WASMSCHED_PAYLOAD; a simulating worker fails the run if it is "fail".
--duration is how long a simulating worker "runs" it.

--idempotency-key K: a second submit with the same K (within 24 h, while the
run exists) prints the first run, with its current state, instead of
submitting another (for retries of scripts and CI jobs).

Examples:
   wasmsched submit nightly
   wasmsched submit nightly --slots 2 --priority 5 --payload '{"day":"2024-06-01"}'
   wasmsched submit etl --id etl-2024-06-01 --duration 30s -o json
   wasmsched submit deploy --idempotency-key "$CI_PIPELINE_ID"`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "id", Usage: "run `ID` (default: generated from the namespace seq)"},
			&cli.IntFlag{Name: "slots", Aliases: []string{"k"}, Value: 1, Usage: "task slots the run needs, `K` >= 1"},
			&cli.IntFlag{Name: "priority", Usage: "priority `P`, a 32-bit integer handed to the group's policy (no built-in reads it; see the help)"},
			&cli.StringFlag{Name: "payload", Usage: "opaque payload `S` for the worker"},
			&cli.DurationFlag{Name: "duration", Value: time.Second, Usage: "simulated run time `D` (simulating workers)"},
			&cli.StringFlag{Name: "idempotency-key", Usage: "submit once per `K`: a repeat prints the run the first one made"},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "G"); err != nil {
				return err
			}
			req := storage.SubmitRequest{
				Group:    c.Args().First(),
				ID:       c.String("id"),
				Slots:    c.Int("slots"),
				Priority: c.Int("priority"),
				Payload:  c.String("payload"),
				Duration: c.Duration("duration"),

				IdempotencyKey: c.String("idempotency-key"),
			}
			if err := checkSubmit(req); err != nil {
				return err
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			out, err := submitRun(c.Context, st, req)
			if err != nil {
				return err
			}
			if li, err := st.Leader(c.Context); err == nil && li.Identity == "" {
				fmt.Fprintf(c.App.ErrWriter, "wasmsched: warning: no host leads namespace %s: the run waits until one does (wasmsched serve, or wasmsched dev)\n", st.Namespace())
			}
			return render(c, out, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tGROUP\tSEQ\tSTATE")
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", out.ID, out.Group, out.Seq, out.State)
			})
		},
	}
}

// checkSubmit validates a request before touching Redis.
func checkSubmit(req storage.SubmitRequest) error {
	if err := storage.ValidateName("group", req.Group); err != nil {
		return asUsage(err)
	}
	if req.ID != "" {
		if err := storage.ValidateName("run", req.ID); err != nil {
			return asUsage(err)
		}
	}
	if len(req.IdempotencyKey) > storage.MaxIdempotencyKey {
		return usageErrorf("--idempotency-key is %d bytes, at most %d", len(req.IdempotencyKey), storage.MaxIdempotencyKey)
	}
	if req.Slots < 1 {
		return usageErrorf("--slots must be >= 1, got %d", req.Slots)
	}
	if req.Duration < 0 {
		return usageErrorf("--duration must not be negative, got %v", req.Duration)
	}
	if req.Priority < math.MinInt32 || req.Priority > math.MaxInt32 {
		return usageErrorf("--priority must be in %d..%d (a policy reads it as a 32-bit integer), got %d", math.MinInt32, math.MaxInt32, req.Priority)
	}
	return nil
}

func submitRun(ctx context.Context, st *storage.Store, req storage.SubmitRequest) (client.Run, error) {
	r, _, err := clientOf(st).SubmitReplay(ctx, req.Group, client.SubmitOptions{ID: req.ID, Slots: req.Slots, Priority: req.Priority,
		Payload: req.Payload, Duration: req.Duration, IdempotencyKey: req.IdempotencyKey})
	switch {
	case errors.Is(err, client.ErrExists):
		return r, usageErrorf("run %s already exists", req.ID)
	case errors.Is(err, client.ErrConflict):
		return r, err // a key reused for another request: exit 1, naming the run
	}
	return r, storeUsage(err)
}
