package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"
)

func init() {
	commands = append(commands, leaderCommand())
}

// leaderView is the JSON of `wasmsched leader`. Identity is "" and Since is
// omitted when nobody leads (lock absent or expired); Epoch is then the last
// leader's epoch (the fence), 0 if there never was one. LastTick is the
// leader's last fenced tick, omitted if there never was one.
type leaderView struct {
	Namespace string     `json:"namespace"`
	Identity  string     `json:"identity"`
	Epoch     int64      `json:"epoch"`
	Since     *time.Time `json:"since,omitempty"`
	LastTick  *tickView  `json:"last_tick,omitempty"`
}

type tickView struct {
	Holder string    `json:"holder"`
	Epoch  int64     `json:"epoch"`
	At     time.Time `json:"at"`
	Count  int64     `json:"count"`
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
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			li, err := st.Leader(c.Context)
			if err != nil {
				return err
			}
			v := leaderView{Namespace: st.Namespace(), Identity: li.Identity, Epoch: li.Epoch}
			if li.Identity != "" && !li.Since.IsZero() {
				s := li.Since.UTC()
				v.Since = &s
			}
			tk, err := st.LastTick(c.Context)
			if err != nil {
				return err
			}
			if tk.Holder != "" {
				v.LastTick = &tickView{Holder: tk.Holder, Epoch: tk.Epoch, At: tk.At.UTC(), Count: tk.Count}
			}
			return render(c, v, func(w io.Writer) {
				id, since := v.Identity, "-"
				if id == "" {
					id = "(none)"
				}
				if v.Since != nil {
					since = v.Since.Format(time.RFC3339Nano)
				}
				fmt.Fprintln(w, "NAMESPACE\tIDENTITY\tEPOCH\tSINCE\tLAST TICK")
				tick := "-"
				if v.LastTick != nil {
					tick = fmt.Sprintf("%s epoch %d #%d by %s", v.LastTick.At.Format(time.RFC3339Nano), v.LastTick.Epoch, v.LastTick.Count, v.LastTick.Holder)
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", v.Namespace, id, v.Epoch, since, tick)
			})
		},
	}
}
