package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(slotsCommand()))
}

// slotsJSON is the json of `slots`.
type slotsJSON struct {
	Workers  []slotsWorkerJSON `json:"workers"`
	Free     int               `json:"free"`
	Assigned int               `json:"assigned"`
}

type slotsWorkerJSON struct {
	Identity string         `json:"identity"`
	Alive    bool           `json:"alive"`
	Slots    []slotJSONView `json:"slots"`
}

// slotJSONView is one slot; run and token are "" when the slot is free.
type slotJSONView struct {
	Index int    `json:"index"`
	Run   string `json:"run"`
	Token string `json:"token"`
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
			v, err := slotsView(c.Context, st)
			if err != nil {
				return err
			}
			return render(c, v, func(w io.Writer) { slotsTable(w, v) })
		},
	}
}

func slotsView(ctx context.Context, st *storage.Store) (slotsJSON, error) {
	sv, err := st.Slots(ctx)
	if err != nil {
		return slotsJSON{}, err
	}
	out := slotsJSON{Workers: make([]slotsWorkerJSON, 0, len(sv.Workers)), Free: sv.Free, Assigned: sv.Assigned}
	for _, w := range sv.Workers {
		wj := slotsWorkerJSON{Identity: w.Identity, Alive: w.Alive, Slots: make([]slotJSONView, 0, len(w.Slots))}
		for _, s := range w.Slots {
			wj.Slots = append(wj.Slots, slotJSONView{Index: s.Index, Run: s.Run, Token: s.Token})
		}
		out.Workers = append(out.Workers, wj)
	}
	return out, nil
}

func slotsTable(w io.Writer, v slotsJSON) {
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
