package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
	"github.com/wasmsched/wasmsched/client"
)

func init() {
	commands = append(commands, withInterspersed(slotsCommand()))
}

func slotsCommand() *cli.Command {
	return &cli.Command{
		Name:      "slots",
		Usage:     "show workers, their slots and what runs on them",
		ArgsUsage: " ",
		Description: `Lists every registered worker (identity ADDR#START_UNIX_NANO#RANDOM, alive
while its heartbeat has not expired) and each of its slots with the run and
assignment token it holds ("" when free), plus the totals of free slots (on
live workers) and assigned slots.

Examples:
   wasmsched slots
   wasmsched slots -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := requireNamespace(c.Context, st); err != nil {
				return err
			}
			v, err := clientOf(st).Slots(c.Context)
			if err != nil {
				return err
			}
			return render(c, v, func(w io.Writer) { slotsTable(w, v) })
		},
	}
}

func slotsTable(w io.Writer, v client.Slots) {
	fmt.Fprintln(w, "WORKER\tALIVE\tSLOT\tRUN\tTOKEN")
	for _, wk := range v.Workers {
		for _, s := range wk.Slots {
			fmt.Fprintf(w, "%s\t%t\t%d\t%s\t%s\n", wk.Identity, wk.Alive, s.Index, dash(s.Run), dash(s.Token))
		}
		if len(wk.Slots) == 0 {
			fmt.Fprintf(w, "%s\t%t\t-\t-\t-\n", wk.Identity, wk.Alive)
		}
	}
	fmt.Fprintf(w, "\nfree: %d  assigned: %d\n", v.Free, v.Assigned)
}
