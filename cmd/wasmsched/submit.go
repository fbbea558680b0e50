package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/internal/tracing"
)

func init() {
	commands = append(commands, withInterspersed(submitCommand()))
}

const submitDescription = `Submits a WAITING run to group G. A group that does not exist yet is created
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

--label K=V (repeatable, at most 16): the run's keys. Its group's policy
sees them (e.g. cancel-in-progress stops the older run of the same ref,
round-robin takes tenants in turn), "runs --label K=V" selects by them. A
key is 1 to 64 bytes of a-z, 0-9, '_', '.', '-'; a value at most 256 bytes
without control characters.

Runs in time:
  --at TIME / --in D   not launched before TIME (RFC 3339, e.g.
                       2026-12-24T18:00:00+01:00) or D from now, by Redis
                       time; it waits outside the group's queue until then
                       and queues behind the runs waiting at that moment.
                       A time in the past is now; at most a year ahead.
  --timeout D          each attempt is stopped after D (SIGTERM, SIGKILL
                       after the worker's --stop-grace) and FAILED "timed
                       out after D" (default: the group's --run-timeout).
  --max-attempts N     a FAILED or timed-out attempt is retried, up to N
                       attempts in all (1..100; default: the group's, else
                       1), under the same run id; attempt n+1 is due
                       min(--retry-cap, --retry-backoff·2^(n-1)) after
                       attempt n failed, half of it random. A STOPPED or
                       DISCARDED run is never retried.

Tracing: the run joins the trace of $TRACEPARENT (a W3C traceparent, as an
exec worker hands its program), so a job that submits more runs keeps one
trace; with OTEL_EXPORTER_OTLP_ENDPOINT set, the submit is a span of it
(docs/operations.md "Tracing").

Examples:
   wasmsched submit nightly
   wasmsched submit nightly --slots 2 --priority 5 --payload '{"day":"2024-06-01"}'
   wasmsched submit etl --id etl-2024-06-01 --duration 30s -o json
   wasmsched submit deploy --idempotency-key "$CI_PIPELINE_ID"
   wasmsched submit deploy --label ref=main --label tenant=acme
   wasmsched submit report --in 10m
   wasmsched submit etl --at 2026-12-24T06:00:00Z --timeout 20m --max-attempts 3 --retry-backoff 30s`

func submitCommand() *cli.Command {
	return &cli.Command{
		Name:        "submit",
		Usage:       "submit a run to a group",
		ArgsUsage:   "G",
		Description: submitDescription,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "id", Usage: "run `ID` (default: generated from the namespace seq)"},
			&cli.IntFlag{Name: "slots", Aliases: []string{"k"}, Value: 1, Usage: "task slots the run needs, `K` from 1 to 1024"},
			&cli.IntFlag{Name: "priority", Usage: "priority `P`, a 32-bit integer handed to the group's policy (no built-in reads it; see the help)"},
			&cli.StringFlag{Name: "payload", Usage: "opaque payload `S` for the worker"},
			&cli.DurationFlag{Name: "duration", Value: time.Second, Usage: "simulated run time `D` (simulating workers)"},
			&cli.StringFlag{Name: "idempotency-key", Usage: "submit once per `K`: a repeat prints the run the first one made"},
			&cli.StringFlag{Name: "at", Usage: "not launched before `TIME` (RFC 3339)"},
			&cli.DurationFlag{Name: "in", Usage: "not launched before `D` from now", DefaultText: "now"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "a label `K=V` of the run (repeatable, at most 16)"},
			&cli.StringSliceFlag{Name: "require", Usage: "run it only on a worker with the label `K=V` (repeatable; on top of its group's --require)"},
			&cli.BoolFlag{Name: "same-worker", Usage: "put all of its slots (--slots) on one worker: it waits for a worker with that many free"},
			&cli.StringSliceFlag{Name: "prefer", Usage: "run it first on a worker with the label `K=V[:W]` (soft; weight W 1 to 1000, default 1; repeatable; on top of its group's --prefer)"},
		}, runTimeFlags("")...),
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "G"); err != nil {
				return err
			}
			if c.Int("slots") == 0 { // 0 would be the default, 1: say so
				return usageErrorf("--slots 0: a run needs at least 1 slot")
			}
			o := client.SubmitOptions{ID: c.String("id"), Slots: c.Int("slots"), Priority: c.Int("priority"),
				Payload: c.String("payload"), Duration: c.Duration("duration"), IdempotencyKey: c.String("idempotency-key")}
			labels, err := labelFlags(c, "label", abi.MaxLabels)
			if err != nil {
				return err
			}
			o.Labels = limits.LabelsMap(labels)
			if c.IsSet("require") {
				req, err := labelFlags(c, "require", abi.MaxLabels)
				if err != nil {
					return err
				}
				o.Require = limits.LabelsMap(req)
			}
			o.SameWorker = c.Bool("same-worker")
			for _, p := range c.StringSlice("prefer") {
				if _, err := limits.ParsePreference(p); err != nil {
					return usageErrorf("--prefer: %v", err)
				}
			}
			o.Prefer = c.StringSlice("prefer")
			if o.NotBefore, err = notBeforeFlags(c); err != nil {
				return err
			}
			timeout, retry, err := runTimeOf(c, "")
			if err != nil {
				return err
			}
			o.MaxAttempts, o.RetryBackoff, o.RetryCap = retry.MaxAttempts, retry.Backoff, retry.Cap
			if timeout != nil {
				o.Timeout = *timeout
			}
			st, _, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			// the caller's trace: TRACEPARENT, as a worker hands its program
			ctx := tracing.ContextWith(c.Context, os.Getenv("TRACEPARENT"))
			out, err := submitRun(ctx, clientOf(st), c.Args().First(), o)
			if err != nil {
				return err
			}
			if li, err := st.Leader(c.Context); err == nil && li.Identity == "" { // one read: the client's Leader also reads the tick
				fmt.Fprintf(c.App.ErrWriter, "wasmsched: warning: no host leads namespace %s: the run waits until one does (wasmsched serve, or wasmsched dev)\n", st.Namespace())
			}
			return render(c, out, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tGROUP\tSEQ\tSTATE")
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", out.ID, out.Group, out.Seq, out.State)
			})
		},
	}
}

// submitRun submits a run: the values are checked once, by storage,
// before anything is written (exit 2 naming the bad one).
func submitRun(ctx context.Context, cl *client.Client, group string, o client.SubmitOptions) (client.Run, error) {
	r, _, err := cl.SubmitReplay(ctx, group, o)
	switch {
	case errors.Is(err, client.ErrExists):
		return r, usageErrorf("run %s already exists", o.ID)
	case errors.Is(err, client.ErrConflict):
		return r, err // a key reused for another request: exit 1, naming the run
	}
	return r, err
}

// runTimeFlags are the per-run time settings of submit, schedule set
// (prefix "") and group set (prefix "run-" for the timeout: the group's
// default for its runs).
func runTimeFlags(prefix string) []cli.Flag {
	def := func(none string) string {
		if prefix != "" {
			return "kept"
		}
		return "the group's, else " + none
	}
	return []cli.Flag{
		&cli.DurationFlag{Name: prefix + "timeout", Usage: "stop each attempt after `D` (FAILED \"timed out\")", DefaultText: def("none")},
		&cli.IntFlag{Name: "max-attempts", Usage: "retry a FAILED attempt, `N` attempts in all (1..100)", DefaultText: def("1")},
		&cli.DurationFlag{Name: "retry-backoff", Usage: "first retry `D` after a failure, doubling", DefaultText: def("1s")},
		&cli.DurationFlag{Name: "retry-cap", Usage: "longest backoff `D` between attempts", DefaultText: def("10m")},
	}
}

// runTimeOf reads runTimeFlags: the timeout (nil: not given) and the
// retry policy (zero: not given). A flag given as 0 where 0 means "not
// given" is refused here (exit 2 naming the flag); the ranges are checked
// once, by storage.
func runTimeOf(c *cli.Context, prefix string) (*time.Duration, client.Retry, error) {
	var timeout *time.Duration
	if c.IsSet(prefix + "timeout") {
		d := c.Duration(prefix + "timeout")
		if d == 0 && prefix == "" { // group set --run-timeout 0: none
			return nil, client.Retry{}, usageErrorf("--timeout 0: leave the flag out for none (the group's)")
		}
		timeout = &d
	}
	r := client.Retry{MaxAttempts: c.Int("max-attempts"), Backoff: c.Duration("retry-backoff"), Cap: c.Duration("retry-cap")}
	switch {
	case c.IsSet("max-attempts") && r.MaxAttempts == 0:
		return nil, r, usageErrorf("--max-attempts 0: want at least 1 (1: no retries)")
	case c.IsSet("retry-backoff") && r.Backoff == 0, c.IsSet("retry-cap") && r.Cap == 0:
		return nil, r, usageErrorf("--retry-backoff and --retry-cap: want at least 1ms (leave them out for the defaults)")
	case (r.Backoff > 0 || r.Cap > 0) && r.MaxAttempts == 0:
		return nil, r, usageErrorf("--retry-backoff and --retry-cap need --max-attempts N (N > 1)")
	}
	return timeout, r, nil
}

// labelFlags reads a repeatable K=V flag (--label, --param): checked,
// every key once, at most max (exit 2 naming the flag and the pair).
func labelFlags(c *cli.Context, name string, max int) ([]abi.Label, error) {
	vs := c.StringSlice(name)
	out := make([]abi.Label, 0, len(vs))
	parse := limits.ParseLabel
	if name == "param" {
		parse = limits.ParseParam
	}
	for _, v := range vs {
		l, err := parse(v)
		if err != nil {
			return nil, usageErrorf("--%s: %s", name, err)
		}
		out = append(out, l)
	}
	ls, err := limits.NormalizeLabels(name+"s", out, max)
	if err != nil {
		return nil, usageErrorf("--%s: %v", name, err)
	}
	return ls, nil
}

// notBeforeFlags reads --at and --in (zero time: neither).
func notBeforeFlags(c *cli.Context) (time.Time, error) {
	switch {
	case c.IsSet("at") && c.IsSet("in"):
		return time.Time{}, usageErrorf("--at and --in are exclusive")
	case c.IsSet("in"):
		d := c.Duration("in")
		if d < 0 || d > limits.MaxNotBefore {
			return time.Time{}, usageErrorf("--in must be in [0, %v] (0: now, the default), got %v", limits.MaxNotBefore, d)
		}
		if d == 0 {
			return time.Time{}, nil // now
		}
		return time.Now().Add(d), nil
	case c.IsSet("at"):
		t, err := time.Parse(time.RFC3339, c.String("at"))
		if err != nil {
			return time.Time{}, usageErrorf("--at %q: want an RFC 3339 time, e.g. 2026-12-24T18:00:00Z or 2026-12-24T18:00:00+01:00", c.String("at"))
		}
		if time.Until(t) > limits.MaxNotBefore {
			return time.Time{}, usageErrorf("--at %s is more than %v ahead", c.String("at"), limits.MaxNotBefore)
		}
		return t, nil
	}
	return time.Time{}, nil
}
