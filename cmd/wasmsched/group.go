package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(groupCommand()))
}

// groupJSON is the json of a group.
type groupJSON struct {
	Name      string `json:"name"`
	Policy    string `json:"policy"`
	MaxActive int    `json:"max_active"`
	Version   int64  `json:"version"`
	Waiting   int    `json:"waiting"`
	Active    int    `json:"active"`
}

func toGroupJSON(g storage.Group) groupJSON {
	return groupJSON{Name: g.Name, Policy: g.Policy, MaxActive: g.MaxActive, Version: g.Version,
		Waiting: g.Waiting, Active: g.Active}
}

func groupCommand() *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "create, change, list and show serial groups",
		Description: `A group is a serial queue of runs with a policy (wait, discard, priority, or
a pushed one) and max_active, the number of runs it may have active at once.

Examples:
   wasmsched group set nightly --policy wait --max-active 2
   wasmsched group list
   wasmsched group show nightly -o json`,
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "create a group or change its policy / max_active",
				ArgsUsage: "G",
				Description: `Creates group G, or changes the settings given as flags and keeps the others.
A new group defaults to policy "wait" and max_active 1.

Examples:
   wasmsched group set nightly
   wasmsched group set nightly --policy priority
   wasmsched group set etl --policy discard --max-active 1 -o json`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Usage: "policy `NAME` (wait, discard, priority, or a pushed policy)"},
					&cli.IntFlag{Name: "max-active", Aliases: []string{"m"}, Usage: "at most `N` (>= 1) active runs"},
				},
				Action: func(c *cli.Context) error {
					if err := exactArgs(c, 1, "G"); err != nil {
						return err
					}
					maxActive := 0
					if c.IsSet("max-active") {
						maxActive = c.Int("max-active")
						if maxActive < 1 {
							return usageErrorf("--max-active must be >= 1, got %d", maxActive)
						}
					}
					policy := c.String("policy")
					if c.IsSet("policy") {
						if err := storage.ValidateName("policy", policy); err != nil {
							return asUsage(err)
						}
					}
					name := c.Args().First()
					if err := storage.ValidateName("group", name); err != nil {
						return asUsage(err)
					}
					st, closeFn, err := openStore(c)
					if err != nil {
						return err
					}
					defer closeFn()
					g, err := setGroup(c.Context, st, name, policy, maxActive)
					if err != nil {
						return err
					}
					return render(c, g, func(w io.Writer) { groupsTable(w, []groupJSON{g}) })
				},
			},
			{
				Name:      "list",
				Usage:     "list groups",
				ArgsUsage: " ",
				Description: `Examples:
   wasmsched group list
   wasmsched group list -o json`,
				Action: func(c *cli.Context) error {
					if err := exactArgs(c, 0, "none"); err != nil {
						return err
					}
					st, closeFn, err := openStore(c)
					if err != nil {
						return err
					}
					defer closeFn()
					gs, err := listGroups(c.Context, st)
					if err != nil {
						return err
					}
					return render(c, gs, func(w io.Writer) { groupsTable(w, gs) })
				},
			},
			{
				Name:      "show",
				Usage:     "show one group",
				ArgsUsage: "G",
				Description: `Unknown group: exit 2.

Examples:
   wasmsched group show nightly
   wasmsched group show nightly -o json`,
				Action: func(c *cli.Context) error {
					if err := exactArgs(c, 1, "G"); err != nil {
						return err
					}
					name := c.Args().First()
					if err := storage.ValidateName("group", name); err != nil {
						return asUsage(err)
					}
					st, closeFn, err := openStore(c)
					if err != nil {
						return err
					}
					defer closeFn()
					g, err := showGroup(c.Context, st, name)
					if err != nil {
						return err
					}
					return render(c, g, func(w io.Writer) { groupsTable(w, []groupJSON{g}) })
				},
			},
		},
	}
}

// setGroup creates or changes a group; "" policy and 0 maxActive keep the
// current value (or the default for a new group).
func setGroup(ctx context.Context, st *storage.Store, name, policy string, maxActive int) (groupJSON, error) {
	g, err := st.SetGroup(ctx, name, policy, maxActive)
	if err != nil {
		return groupJSON{}, storeUsage(err)
	}
	return toGroupJSON(g), nil
}

func listGroups(ctx context.Context, st *storage.Store) ([]groupJSON, error) {
	gs, err := st.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]groupJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, toGroupJSON(g))
	}
	return out, nil
}

func showGroup(ctx context.Context, st *storage.Store, name string) (groupJSON, error) {
	g, err := st.GetGroup(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		return groupJSON{}, usageErrorf("group %s not found", name)
	}
	if err != nil {
		return groupJSON{}, storeUsage(err)
	}
	return toGroupJSON(g), nil
}

func groupsTable(w io.Writer, gs []groupJSON) {
	fmt.Fprintln(w, "NAME\tPOLICY\tMAX_ACTIVE\tWAITING\tACTIVE\tVERSION")
	for _, g := range gs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", g.Name, g.Policy, g.MaxActive, g.Waiting, g.Active, g.Version)
	}
}
