package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
)

func init() {
	commands = append(commands, withInterspersed(scheduleCommand()))
}

func scheduleCommand() *cli.Command {
	return &cli.Command{
		Name:  "schedule",
		Usage: "cron schedules: submit a run to a group on every tick",
		Description: `A schedule submits one run to its group per tick of a cron expression,
exactly once per tick across leader failover (the tick's run id is
s-NAME-<tick unix ms>, and the leader submits it and moves to the next tick in
one fenced script). Ticks missed while no leader ran are not made up one by
one: the latest of them is submitted once, the others are counted as missed.

Overlap is the group's serial policy's: wait queues a tick behind a running
one, discard skips it, priority replaces the older run (Temporal's overlap
policies).

Examples:
   wasmsched schedule set nightly-etl --group etl --cron "0 2 * * *" --tz Europe/Paris
   wasmsched schedule set heartbeat --group probes --cron "@every 30s" --timeout 20s
   wasmsched schedule list
   wasmsched schedule pause nightly-etl`,
		Subcommands: []*cli.Command{
			scheduleSetCommand(),
			{Name: "list", Usage: "list schedules", Action: scheduleList},
			{Name: "show", Usage: "show a schedule", ArgsUsage: "NAME", Action: scheduleShow},
			{Name: "pause", Usage: "stop a schedule's ticks", ArgsUsage: "NAME", Action: scheduleOp},
			{Name: "resume", Usage: "resume a paused schedule from its next tick after now", ArgsUsage: "NAME", Action: scheduleOp},
			{Name: "delete", Usage: "delete a schedule (the runs it submitted stay)", ArgsUsage: "NAME", Action: scheduleOp},
		},
	}
}

func scheduleSetCommand() *cli.Command {
	return &cli.Command{
		Name:      "set",
		Usage:     "create or replace a schedule",
		ArgsUsage: "NAME",
		Description: `Creates schedule NAME, or replaces its settings (its counters are kept); its
next tick is the first after now.

--cron is a standard 5-field expression (minute hour day-of-month month
day-of-week: "*/5 * * * *", "0 2 * * 1-5") or a descriptor (@yearly, @monthly,
@weekly, @daily, @hourly, @every D with D >= 1s), read in --tz (an IANA zone,
default UTC). The runs get --payload, --priority, --slots, --timeout and the
retry flags (see submit --help); unset ones take the group's defaults.

Examples:
   wasmsched schedule set nightly-etl --group etl --cron "0 2 * * *" --tz Europe/Paris
   wasmsched schedule set every-5m --group report --cron "*/5 * * * *" --max-attempts 3`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "submit to group `G` (required)"},
			&cli.StringFlag{Name: "cron", Usage: "cron `EXPR` (required)"},
			&cli.StringFlag{Name: "tz", Usage: "IANA `ZONE` of the expression (default UTC)"},
			&cli.StringFlag{Name: "payload", Usage: "payload `S` of each run"},
			&cli.IntFlag{Name: "priority", Usage: "priority `P` of each run"},
			&cli.IntFlag{Name: "slots", Aliases: []string{"k"}, Value: 1, Usage: "task slots `K` of each run"},
			&cli.BoolFlag{Name: "paused", Usage: "create it paused (schedule resume starts it)"},
		}, runTimeFlags("")...),
		Action: scheduleSet,
	}
}

func scheduleName(c *cli.Context) (string, error) {
	if err := exactArgs(c, 1, "NAME"); err != nil {
		return "", err
	}
	name := c.Args().First()
	if err := limits.ValidateName("schedule", name); err != nil {
		return "", asUsage(err)
	}
	if len(name) > limits.MaxScheduleName {
		return "", usageErrorf("schedule name is %d bytes, at most %d", len(name), limits.MaxScheduleName)
	}
	return name, nil
}

func scheduleSet(c *cli.Context) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	spec := client.ScheduleSpec{Group: c.String("group"), Cron: c.String("cron"), TZ: c.String("tz"), Payload: c.String("payload"),
		Priority: c.Int("priority"), Slots: c.Int("slots"), Paused: c.Bool("paused")}
	// Flags the store cannot tell from a zero value are checked here; the
	// values themselves (group name, cron and tz, payload, priority) once,
	// by storage, before anything is written.
	switch {
	case spec.Group == "":
		return usageErrorf("--group is required")
	case spec.Cron == "":
		return usageErrorf("--cron is required")
	case spec.Slots < 1:
		return usageErrorf("--slots must be >= 1, got %d", spec.Slots)
	}
	timeout, r, err := runTimeOf(c, "")
	if err != nil {
		return err
	}
	if timeout != nil {
		spec.Timeout = *timeout
	}
	spec.Retry = r
	_, cl, closeFn, err := openNamespace(c, false)
	if err != nil {
		return err
	}
	defer closeFn()
	sc, err := cl.SetSchedule(c.Context, name, spec)
	if err != nil {
		return err
	}
	return render(c, sc, func(w io.Writer) { schedulesTable(w, []client.Schedule{sc}) })
}

func scheduleList(c *cli.Context) error {
	if err := exactArgs(c, 0, ""); err != nil {
		return err
	}
	_, cl, closeFn, err := openNamespace(c, false)
	if err != nil {
		return err
	}
	defer closeFn()
	scs, err := cl.Schedules(c.Context)
	if err != nil {
		return err
	}
	return render(c, scs, func(w io.Writer) { schedulesTable(w, scs) })
}

func scheduleShow(c *cli.Context) error {
	return withSchedule(c, func(cl *client.Client, name string) error {
		sc, err := cl.Schedule(c.Context, name)
		if err != nil {
			return err
		}
		return render(c, sc, func(w io.Writer) { schedulesTable(w, []client.Schedule{sc}) })
	})
}

// scheduleOp is pause, resume and delete.
func scheduleOp(c *cli.Context) error {
	return withSchedule(c, func(cl *client.Client, name string) error {
		var err error
		switch c.Command.Name {
		case "pause":
			err = cl.PauseSchedule(c.Context, name)
		case "resume":
			_, err = cl.ResumeSchedule(c.Context, name)
		default:
			err = cl.DeleteSchedule(c.Context, name)
		}
		if err == nil {
			fmt.Fprintf(c.App.Writer, "schedule %s: %sd\n", name, c.Command.Name)
		}
		return err
	})
}

// withSchedule runs fn on the schedule named by the argument; an unknown
// schedule exits 2.
func withSchedule(c *cli.Context, fn func(cl *client.Client, name string) error) error {
	name, err := scheduleName(c)
	if err != nil {
		return err
	}
	st, cl, closeFn, err := openNamespace(c, false)
	if err != nil {
		return err
	}
	defer closeFn()
	err = fn(cl, name)
	if errors.Is(err, client.ErrNotFound) {
		return usageErrorf("schedule %s not found in namespace %s", name, st.Namespace())
	}
	return err
}

func schedulesTable(w io.Writer, scs []client.Schedule) {
	fmt.Fprintln(w, "NAME\tGROUP\tCRON\tTZ\tNEXT\tLAST_TICK\tLAST_RUN\tSUBMITTED\tMISSED\tPAUSED")
	for _, s := range scs {
		tz := s.TZ
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%v\n", s.Name, s.Group, s.Cron, tz, tableTimeP(s.Next),
			tableTimeP(s.LastTick), dash(s.LastRun), s.Submitted, s.Missed, s.Paused)
	}
}
