package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// The operator's group controls: pause, resume, drain, and the bulk
// discard and stop of a group's runs.

const groupControlsDescription = `Pauses group G: the leader asks its policy nothing and launches nothing until
"group resume G" (a decision made before the pause is stale and not applied).
Submits are accepted and queue; its active runs go on. Who and when are
recorded (group show, the API, the UI); run explain says the group is paused.

Examples:
   wasmsched group pause nightly --who "ops: db migration"`

const groupControlsDescription2 = `Discards every WAITING run of group G (the ones not due yet too), oldest
first, 100 per script, each recorded with --reason (default: "discarded by"
--who, else $USER); its active runs go on. With --label K=V (repeatable),
only the runs carrying every one of those labels. Prints how many.

Examples:
   wasmsched group discard deploy --label ref=feature-x`

const groupControlsDescription3 = `Asks every active run of group G to stop (LAUNCHED ones end STOPPED at once,
RUNNING ones once their worker stopped them), recorded with --reason. A
group that is not paused launches its next runs: pause it first, or use
"group drain". The reason defaults to "stopped by" --who (else $USER). With
--label K=V (repeatable), only the runs carrying every one of those labels.
Prints how many.`

const groupControlsDescription4 = `Pauses group G, then (with --discard) discards its waiting runs and (with
--stop) stops its active ones, and waits up to --wait for the active runs
to end. Exit 0 when no run is active any more, 1 when some are still
active after --wait. Then group delete G succeeds if no run waits (with
--discard), else group delete G --force discards the waiting ones.

Examples:
   wasmsched group drain nightly --discard --stop && wasmsched group delete nightly`

// whoFlag is --who, recorded as who did what (whoOf).
func whoFlag(what string) cli.Flag {
	return &cli.StringFlag{Name: "who", Usage: "recorded as who " + what, DefaultText: "$USER"}
}

func groupControlCommands() []*cli.Command {
	who := whoFlag("paused it")
	reason := func(def string) cli.Flag {
		return &cli.StringFlag{Name: "reason", Value: def, Usage: "recorded with each run"}
	}
	return []*cli.Command{
		{
			Name: "pause", Usage: "pause a group: its policy is not asked, nothing launches", ArgsUsage: "G",
			Description: groupControlsDescription,
			Flags:       []cli.Flag{who},
			Action: func(c *cli.Context) error {
				return withGroup(c, func(cl *client.Client, g string) error {
					if err := cl.PauseGroup(c.Context, g, whoOf(c)); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "group %s: paused\n", g)
					return nil
				})
			},
		},
		{
			Name: "resume", Usage: "resume a paused group", ArgsUsage: "G",
			Action: func(c *cli.Context) error {
				return withGroup(c, func(cl *client.Client, g string) error {
					if err := cl.ResumeGroup(c.Context, g); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "group %s: resumed\n", g)
					return nil
				})
			},
		},
		{
			Name: "discard", Usage: "discard every waiting run of a group (bulk, in bounded chunks)", ArgsUsage: "G",
			Description: groupControlsDescription2,
			Flags:       []cli.Flag{reason("discarded by --who"), whoFlag("discarded them"), bulkLabel},
			Action: func(c *cli.Context) error {
				labels, err := bulkLabels(c)
				if err != nil {
					return err
				}
				return withGroup(c, func(cl *client.Client, g string) error {
					n, err := cl.DiscardWaiting(c.Context, g, bulkReason(c, "discarded"), labels)
					if err == nil {
						fmt.Fprintf(c.App.Writer, "group %s: %d waiting run(s) discarded\n", g, n)
					}
					return err
				})
			},
		},
		{
			Name: "stop", Usage: "stop every active run of a group", ArgsUsage: "G",
			Description: groupControlsDescription3,
			Flags:       []cli.Flag{reason("stopped by --who"), whoFlag("stopped them"), bulkLabel},
			Action: func(c *cli.Context) error {
				labels, err := bulkLabels(c)
				if err != nil {
					return err
				}
				return withGroup(c, func(cl *client.Client, g string) error {
					n, err := cl.StopActive(c.Context, g, bulkReason(c, "stopped"), labels)
					if err == nil {
						fmt.Fprintf(c.App.Writer, "group %s: %d active run(s) asked to stop\n", g, n)
					}
					return err
				})
			},
		},
		groupRetryCommand(),
		{
			Name: "drain", Usage: "pause a group, empty it, wait for its active runs: then it can be deleted", ArgsUsage: "G",
			Description: groupControlsDescription4,
			Flags: []cli.Flag{whoFlag("drained it (paused it)"),
				&cli.BoolFlag{Name: "discard", Usage: "discard the waiting runs"},
				&cli.BoolFlag{Name: "stop", Usage: "stop the active runs"},
				&cli.DurationFlag{Name: "wait", Value: time.Minute, Usage: "wait up to `D` for the active runs to end"},
				reason("group drained"),
			},
			Action: groupDrain,
		},
	}
}

// bulkLabel selects the runs of a bulk discard or stop by label.
var bulkLabel = &cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "only runs with label `K=V` (repeatable: all of them)"}

func bulkLabels(c *cli.Context) (map[string]string, error) {
	ls, err := labelFlags(c, "label", abi.MaxLabels)
	return limits.LabelsMap(ls), err
}

// bulkReason is --reason, else "VERB by WHO" (whoOf): each run a bulk
// action ends records who did it (and its finished_at, when).
func bulkReason(c *cli.Context, verb string) string {
	if c.IsSet("reason") {
		return c.String("reason")
	}
	return verb + " by " + whoOf(c)
}

// whoOf is --who, else $USER, else "cli".
func whoOf(c *cli.Context) string {
	if w := c.String("who"); w != "" {
		return w
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "cli"
}

// withGroup runs fn on the group named by the argument (exit 2 when it
// does not exist).
func withGroup(c *cli.Context, fn func(cl *client.Client, g string) error) error {
	name, st, closeFn, err := groupArg(c)
	if err != nil {
		return err
	}
	defer closeFn()
	return fn(clientOf(st), name)
}

func groupDrain(c *cli.Context) error {
	if c.Duration("wait") < 0 {
		return usageErrorf("--wait must not be negative, got %v", c.Duration("wait"))
	}
	return withGroup(c, func(cl *client.Client, g string) error {
		if err := cl.PauseGroup(c.Context, g, whoOf(c)); err != nil {
			return err
		}
		out := c.App.Writer
		fmt.Fprintf(out, "group %s: paused\n", g)
		if c.Bool("discard") {
			n, err := cl.DiscardWaiting(c.Context, g, c.String("reason"), nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "group %s: %d waiting run(s) discarded\n", g, n)
		}
		if c.Bool("stop") {
			n, err := cl.StopActive(c.Context, g, c.String("reason"), nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "group %s: %d active run(s) asked to stop\n", g, n)
		}
		deadline := time.Now().Add(c.Duration("wait"))
		for {
			gr, err := cl.Group(c.Context, g)
			if err != nil {
				return err
			}
			if gr.Active == 0 {
				if n := gr.Waiting + gr.Delayed; n > 0 {
					fmt.Fprintf(out, "group %s: no run active; %d still waiting (group delete %s --force discards them)\n", g, n, g)
				} else {
					fmt.Fprintf(out, "group %s: drained (0 waiting, 0 active): group delete %s succeeds\n", g, g)
				}
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("group %s: %d run(s) still active after %v", g, gr.Active, c.Duration("wait"))
			}
			select {
			case <-c.Context.Done():
				return c.Context.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// groupRetryCommand is group retry.
func groupRetryCommand() *cli.Command {
	return &cli.Command{
		Name: "retry", Usage: "retry a group's FAILED (or STOPPED) runs: each back to WAITING as its next attempt", ArgsUsage: "G",
		Description: `Puts the group's finished runs back to WAITING, each as a new attempt of the
same run (its earlier attempts stay in its record, run show lists them), in
bounded chunks. --state FAILED (the default) or STOPPED; --label K=V, only
runs with all of them; --since D, only runs that finished in the last D.

Examples:
   wasmsched group retry thumbnails
   wasmsched group retry thumbnails --label tenant=a --since 2h`,
		Flags: []cli.Flag{whoFlag("retried them"), bulkLabel,
			&cli.StringFlag{Name: "state", Value: "FAILED", Usage: "retry the runs in `STATE`: FAILED or STOPPED"},
			&cli.DurationFlag{Name: "since", Usage: "only runs that finished in the last `D`"},
			&cli.IntFlag{Name: "limit", Usage: "at most `N` runs (0: all)"},
		},
		Action: func(c *cli.Context) error {
			labels, err := bulkLabels(c)
			if err != nil {
				return err
			}
			o := client.RetryOptions{State: strings.ToUpper(c.String("state")), Labels: labels, Limit: c.Int("limit"), Who: whoOf(c)}
			if o.State != "FAILED" && o.State != "STOPPED" {
				return usageErrorf("--state %s: want FAILED or STOPPED", c.String("state"))
			}
			if c.Duration("since") < 0 || c.Int("limit") < 0 {
				return usageErrorf("--since and --limit must not be negative")
			}
			if d := c.Duration("since"); d > 0 {
				o.Since = time.Now().Add(-d)
			}
			return withGroup(c, func(cl *client.Client, g string) error {
				n, err := cl.RetryGroup(c.Context, g, o)
				if err == nil {
					fmt.Fprintf(c.App.Writer, "group %s: %d %s run(s) retried\n", g, n, o.State)
				}
				return err
			})
		},
	}
}
