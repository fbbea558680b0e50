package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
)

func init() {
	commands = append(commands, withInterspersed(lostCommand()))
}

func lostCommand() *cli.Command {
	return &cli.Command{
		Name:      "lost",
		Usage:     "list runs a worker executed that the store no longer has (lost by a Redis failover)",
		ArgsUsage: " ",
		Description: `A worker that reports a run the store does not know any more (the run was
acknowledged by a Redis master that died before its replica got it) keeps
the report in the namespace's lost list instead of dropping it: what ran,
when, on which worker, with what outcome. Nothing else remembers these runs;
resubmit them if they must run. The list keeps the newest 1,000.

With durable acknowledgements on (the default when Redis has replicas: see
docs/operations.md "What survives what") this list stays empty.

Examples:
   wasmsched lost
   wasmsched lost --limit 20 -o json`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Usage: "show at most `N` reports (0: all kept)", Value: 0},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			if n := c.Int("limit"); n < 0 {
				return usageErrorf("--limit %d: want 0 or more", n)
			}
			_, cl, closeFn, err := openNamespace(c, true)
			if err != nil {
				return err
			}
			defer closeFn()
			v, err := cl.LostRuns(c.Context, c.Int("limit"))
			if err != nil {
				return err
			}
			if v == nil {
				v = []client.LostRun{}
			}
			return render(c, v, func(w io.Writer) { lostTable(w, v) })
		},
	}
}

func lostTable(w io.Writer, v []client.LostRun) {
	fmt.Fprintln(w, "AT\tRUN\tOUTCOME\tTOKEN\tWORKER\tREASON")
	for _, l := range v {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", tableTime(time.UnixMilli(l.At)), l.Run, l.Outcome, l.Token, l.Worker, dash(l.Reason))
	}
	if len(v) == 0 {
		fmt.Fprintln(w, "(no lost runs)")
	}
}
