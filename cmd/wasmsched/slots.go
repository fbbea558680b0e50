package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

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
assignment token it holds ("" when free), whether it is draining (a
graceful shutdown: it finishes what it runs and takes nothing new), plus the
totals of free slots (on live workers that are not draining: where a run
may be placed), assigned slots and the free slots of draining workers.

Examples:
   wasmsched slots
   wasmsched slots -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			_, cl, closeFn, err := openNamespace(c, true)
			if err != nil {
				return err
			}
			defer closeFn()
			v, err := cl.Slots(c.Context)
			if err != nil {
				return err
			}
			return render(c, v, func(w io.Writer) { slotsTable(w, v) })
		},
	}
}

func slotsTable(w io.Writer, v client.Slots) {
	fmt.Fprintln(w, "WORKER\tALIVE\tDRAINING\tSLOT\tRUN\tTOKEN")
	for _, wk := range v.Workers {
		for _, s := range wk.Slots {
			fmt.Fprintf(w, "%s\t%t\t%t\t%d\t%s\t%s\n", wk.Identity, wk.Alive, wk.Draining, s.Index, dash(s.Run), dash(s.Token))
		}
		if len(wk.Slots) == 0 {
			fmt.Fprintf(w, "%s\t%t\t%t\t-\t-\t-\n", wk.Identity, wk.Alive, wk.Draining)
		}
	}
	placed := false
	for _, wk := range v.Workers {
		placed = placed || len(wk.Labels) > 0 || len(wk.Groups) > 0
	}
	if placed { // only when a worker registered any: placement (worker --label, --groups)
		fmt.Fprintln(w, "\nWORKER\tLABELS\tGROUPS")
		for _, wk := range v.Workers {
			groups := "(every group)"
			if len(wk.Groups) > 0 {
				groups = strings.Join(wk.Groups, ",")
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", wk.Identity, dash(pairs(wk.Labels)), groups)
		}
	}
	fmt.Fprintf(w, "\nfree: %d  assigned: %d", v.Free, v.Assigned)
	if v.Draining > 0 {
		fmt.Fprintf(w, "  draining: %d (free slots of draining workers: no run is placed there)", v.Draining)
	}
	fmt.Fprintln(w)
}

// pairs is m as "k=v,k=v", sorted by key ("" when empty).
func pairs(m map[string]string) string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}
