package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

func init() {
	commands = append(commands, leaderCommand())
}

func leaderCommand() *cli.Command {
	return &cli.Command{
		Name:  "leader",
		Usage: "show the namespace's current leader, its epoch and its last tick",
		Description: `Prints the leader of --namespace: its identity stamp, the fencing epoch,
since when it leads, and its last tick (a fenced liveness write every
TTL/3). Nobody leads when the lock is absent or expired: identity is then
empty, since is omitted and epoch is the last leader's.

Examples:
   wasmsched leader
   wasmsched leader -n prod -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			if _, err := outputFormat(c); err != nil {
				return err
			}
			_, cl, closeFn, err := openNamespace(c, true)
			if err != nil {
				return err
			}
			defer closeFn()
			v, err := cl.Leader(c.Context)
			if err != nil {
				return err
			}
			return render(c, v, func(w io.Writer) {
				id, since := v.Identity, "-"
				if id == "" {
					id = "(none)"
				}
				if v.Since != nil {
					since = tableTimeP(v.Since)
				}
				fmt.Fprintln(w, "NAMESPACE\tIDENTITY\tEPOCH\tSINCE\tLAST TICK")
				tick := "-"
				if t := v.LastTick; t != nil {
					tick = fmt.Sprintf("%s (tick %d of epoch %d)", tableTime(t.At), t.Count, t.Epoch)
					if t.Holder != v.Identity {
						tick += " by " + t.Holder
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", v.Namespace, id, v.Epoch, since, tick)
			})
		},
	}
}
