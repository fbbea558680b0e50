package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/policytool"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/storage"
)

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
			st, _, closeFn, err := openNamespace(c, false)
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

func explainRun(ctx context.Context, sb policytool.Sandbox, st *storage.Store, id string) (ex client.Explanation, err error) {
	err = withInspector(ctx, sb, func(in *host.Inspector) error {
		ex, err = in.Explain(ctx, st, id)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			return usageErrorf("run %s not found in namespace %s (expired or never existed)", id, st.Namespace())
		case err != nil:
			return policytool.LoadError(err)
		}
		return nil
	})
	return ex, err
}

func explainTable(w io.Writer, ex client.Explanation) {
	fmt.Fprintf(w, "RUN\t%s (group %s, seq %d)\n", ex.Run.ID, ex.Run.Group, ex.Run.Seq)
	fmt.Fprintf(w, "STATE\t%s\n", ex.Run.State)
	if ex.Place > 0 {
		fmt.Fprintf(w, "PLACE\t%d of %d waiting (1 = next)\n", ex.Place, ex.Waiting)
		fmt.Fprintf(w, "ACTIVE\t%d of max_active %d\n", len(ex.Active), ex.MaxActive)
		for _, a := range ex.Active {
			fmt.Fprintf(w, "\t%s %s (seq %d)\n", a.ID, a.State, a.Seq)
		}
		fmt.Fprintf(w, "POLICY\t%s\n", dash(ex.Policy))
		now := "no action for it"
		if ex.Now != "" {
			now = ex.Now
			if ex.NowReason != "" {
				now += ": " + ex.NowReason
			}
		}
		fmt.Fprintf(w, "NOW\t%s\n", now)
	}
	fmt.Fprintf(w, "WHY\t%s\n", ex.Why)
}
