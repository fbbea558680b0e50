package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/storage"
)

// explainJSON is `run explain`: why a run waits, or what moved it.
type explainJSON struct {
	Run   runJSON `json:"run"`
	State string  `json:"state"`
	// For a WAITING run:
	Ahead     *int64    `json:"ahead,omitempty"`      // waiting runs older than it (0 = the head)
	Waiting   *int64    `json:"waiting,omitempty"`    // waiting runs in the group
	MaxActive int       `json:"max_active,omitempty"` // the group's
	Active    []runJSON `json:"active,omitempty"`     // the group's active runs
	Policy    string    `json:"policy,omitempty"`     // the group's policy and version
	InWindow  *bool     `json:"in_window,omitempty"`  // the policy sees the run (a deep group shows a window)
	// Now is what the group's policy decides for this run on the live
	// state, read-only: launch, discard, discard_below (covered), or none.
	Now       string `json:"now,omitempty"`
	NowReason string `json:"now_reason,omitempty"`
	// Why is the explanation in words.
	Why string `json:"why"`
}

func runExplainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "say why a run waits (its place, the active runs ahead, what its policy decides now) or what decision moved it",
		ArgsUsage: "ID",
		Description: `For a WAITING run: its place in the group's queue, the group's active runs
and max_active, the group's policy and version, and what that policy
decides for the run on the live state now (one read-only snapshot and a
dry-run decision; nothing is written). For a run a decision moved: that
decision (run show prints the same record). Unknown run: exit 2.

Examples:
   wasmsched run explain r42
   wasmsched run explain r42 -o json`,
		Flags: sandboxFlags(),
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "ID"); err != nil {
				return err
			}
			sb, err := sandboxFrom(c)
			if err != nil {
				return err
			}
			st, closeFn, err := openStore(c)
			if err != nil {
				return err
			}
			defer closeFn()
			ex, err := explainRun(c.Context, sb, st, c.Args().First())
			if err != nil {
				return err
			}
			return render(c, ex, func(w io.Writer) { explainTable(w, ex) })
		},
	}
}

func explainRun(ctx context.Context, sb sandbox, st *storage.Store, id string) (explainJSON, error) {
	rv, err := showRun(ctx, st, id) // the not-found message, the decision record
	if err != nil {
		return explainJSON{}, err
	}
	rt, err := newPolicyRuntime(ctx, sb)
	if err != nil {
		return explainJSON{}, err
	}
	defer rt.Close(context.Background())
	ex, err := host.Explain(ctx, rt, st, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return explainJSON{}, usageErrorf("run %s not found (expired or never existed)", id)
	case err != nil:
		return explainJSON{}, storeUsage(loadUsage(err))
	}
	out := explainJSON{Run: rv, State: string(ex.Run.State), Why: ex.Why}
	if ex.Run.State != storage.StateWaiting {
		if ex.Run.State != storage.State(rv.State) { // it moved meanwhile
			if rv, err = showRun(ctx, st, id); err != nil {
				return explainJSON{}, err
			}
			out.Run = rv
		}
		return out, nil
	}
	out.Ahead, out.Waiting, out.MaxActive, out.Policy = &ex.Ahead, &ex.Total, ex.MaxActive, ex.Policy
	out.InWindow = &ex.InWindow
	for _, r := range ex.Active {
		out.Active = append(out.Active, toRunJSON(r))
	}
	out.Now, out.NowReason = ex.Now, ex.NowReason
	return out, nil
}

func explainTable(w io.Writer, ex explainJSON) {
	fmt.Fprintf(w, "RUN\t%s (group %s, seq %d)\n", ex.Run.ID, ex.Run.Group, ex.Run.Seq)
	fmt.Fprintf(w, "STATE\t%s\n", ex.State)
	if ex.Ahead != nil {
		fmt.Fprintf(w, "PLACE\t%d of %d waiting (0 = next)\n", *ex.Ahead, *ex.Waiting)
		fmt.Fprintf(w, "ACTIVE\t%d of max_active %d\n", len(ex.Active), ex.MaxActive)
		for _, a := range ex.Active {
			fmt.Fprintf(w, "\t%s %s (seq %d)\n", a.ID, a.State, a.Seq)
		}
		fmt.Fprintf(w, "POLICY\t%s\n", dash(ex.Policy))
		fmt.Fprintf(w, "NOW\t%s %s\n", dash(ex.Now), ex.NowReason)
	}
	fmt.Fprintf(w, "WHY\t%s\n", ex.Why)
}
