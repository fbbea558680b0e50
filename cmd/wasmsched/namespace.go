package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/policytool"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
)

func init() {
	commands = append(commands, withInterspersed(namespaceCommand()))
}

func namespaceCommand() *cli.Command {
	return &cli.Command{
		Name:  "namespace",
		Usage: "show and set how the namespace's launched runs get slots (its allocation policy)",
		Description: `A launched run waits for slots: all it needs, at once. The namespace's
allocation policy decides the order in which the waiting runs get them;
the leader places them in that order, passing over a run that does not fit
for the ones behind it (backfill) until it has waited serve --slot-guard,
then holding freed slots for it.

Built-in allocation policies:
   fifo            launch order (the default)
   fair            weighted fair share across the values of one label
                   (--fair-label, e.g. tenant; without it, across groups):
                   the next slot goes to the value with the fewest slots in
                   use per unit of weight (--weights a=2,b=1; 1 when unnamed)
   priority-first  highest run priority first, the oldest among equals
                   (--allocate priority is the same)
A pushed allocation policy (policy push NAME FILE of a plugin of kind
allocation) works too; --param passes it parameters.`,
		Subcommands: []*cli.Command{namespaceShowCommand(), namespaceSetCommand(), namespaceSnapshotCommand()},
	}
}

// client.AllocationStatus is namespace show's record.
func namespaceShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show the allocation policy, its parameters and who holds the slots",
		ArgsUsage: " ",
		Description: `Prints the namespace's allocation policy and parameters, the free and total
slots of live workers, how many launched runs wait for slots, and the slots
in use per value of the fair-share label (or per group without one).

Examples:
   wasmsched namespace show
   wasmsched namespace show -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			st, cl, closeFn, err := openNamespace(c, true)
			if err != nil {
				return err
			}
			defer closeFn()
			as, err := host.ReadAllocationStatus(c.Context, st, "") // counts and usage, not the queue's runs
			if err != nil {
				return err
			}
			a, err := cl.Allocation(c.Context)
			if err != nil {
				return err
			}
			v := client.AllocationStatus{Namespace: st.Namespace(), Allocation: a, Free: as.Free, Slots: as.Slots,
				Launched: as.Launched, Usage: client.UsageOf(as.Usage)}
			return render(c, v, func(w io.Writer) { namespaceTable(w, v) })
		},
	}
}

func namespaceTable(w io.Writer, v client.AllocationStatus) {
	a := v.Allocation
	fmt.Fprintf(w, "namespace\t%s\n", v.Namespace)
	fmt.Fprintf(w, "allocate\t%s\n", a.Policy)
	if a.FairLabel != "" {
		fmt.Fprintf(w, "fair label\t%s\n", a.FairLabel)
	}
	if len(a.Weights) > 0 {
		fmt.Fprintf(w, "weights\t%s\n", limits.FormatWeights(a.Weights))
	}
	keys := make([]string, 0, len(a.Params))
	for k := range a.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "param\t%s=%s\n", k, a.Params[k])
	}
	fmt.Fprintf(w, "slots\t%d free of %d (live workers)\n", v.Free, v.Slots)
	fmt.Fprintf(w, "launched\t%d waiting for slots\n", v.Launched)
	by, key := "GROUP", ""
	if a.FairLabel != "" {
		by, key = strings.ToUpper(a.FairLabel), a.FairLabel
	}
	fmt.Fprintf(w, "\n%s\tSLOTS\tSHARE\tRUNS\tWEIGHT\n", by)
	n := 0
	for _, u := range v.Usage {
		if u.Key != key {
			continue
		}
		n++
		share := 0.0
		if v.Slots > 0 {
			share = 100 * float64(u.Slots) / float64(v.Slots)
		}
		wt := 1
		if x, ok := a.Weights[u.Value]; ok {
			wt = x
		}
		fmt.Fprintf(w, "%s\t%d\t%.0f%%\t%d\t%d\n", dash(u.Value), u.Slots, share, u.Runs, wt)
	}
	if n == 0 {
		fmt.Fprintln(w, "(no slot in use)")
	}
}

const namespaceSetDescription = `Changes only what the flags say (--reset first goes back to fifo with no
parameters). The leader's slot manager uses the new settings on its next
pass; every host pre-loads the policy. A policy that fails (traps, times
out, returns an invalid order) changes nothing: the namespace keeps
allocating with the previous policy that decided well, and a pushed
version that keeps failing is rolled back (serve --rollback-after).

Examples:
   wasmsched namespace set --allocate fair --fair-label tenant --weights a=2,b=1
   wasmsched namespace set --weights a=3
   wasmsched namespace set --allocate priority
   wasmsched namespace set --allocate myalloc --param spread=zone
   wasmsched namespace set --placement spread
   wasmsched namespace set --reset

Placement (--placement, the parameter placement) chooses the worker of each
run: spread (the worker with the most free slots), pack (fill one worker
before the next, so idle ones can be scaled down) or policy (the worker the
allocation policy names, ABI version 5; spread where it names none). Set,
every launch goes through the leader's slot pass; unset (""), a run takes
the first free slots it may use. Either way a run goes only to a worker
that serves its group and carries what it requires (group set --require).`

func namespaceSetCommand() *cli.Command {
	return &cli.Command{
		Name:        "set",
		Usage:       "set the allocation policy and its parameters",
		ArgsUsage:   " ",
		Description: namespaceSetDescription,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "allocate", Usage: "the allocation policy `NAME`: fifo, fair, priority-first (or priority), or a pushed one"},
			&cli.StringFlag{Name: "fair-label", Usage: "fair: the label `KEY` whose values share the slots (\"\" = across groups)"},
			&cli.StringFlag{Name: "weights", Usage: "fair: `VALUE=W,...` weights 1..1000 (a value not named weighs 1; \"\" clears)"},
			&cli.StringSliceFlag{Name: "param", Usage: "a parameter `KEY=VALUE` for the policy (repeatable; KEY= removes it)"},
			&cli.StringFlag{Name: "placement", Usage: "which worker a run goes to: `MODE` spread, pack or policy (\"\": the first free slots)"},
			&cli.BoolFlag{Name: "reset", Usage: "start from the defaults (fifo, no parameters)"},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none; use the flags"); err != nil {
				return err
			}
			if !c.IsSet("allocate") && !c.IsSet("fair-label") && !c.IsSet("weights") && !c.IsSet("param") && !c.IsSet("placement") && !c.Bool("reset") {
				return usageErrorf("namespace set: nothing to set (--allocate, --fair-label, --weights, --param, --placement or --reset)")
			}
			st, cl, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			a := client.Allocation{Policy: limits.DefaultAllocation}
			if !c.Bool("reset") {
				if a, err = cl.Allocation(c.Context); err != nil {
					return err
				}
			}
			if c.IsSet("allocate") {
				a.Policy = host.AllocationPolicyName(c.String("allocate"))
				if err := limits.ValidateName("policy", a.Policy); err != nil {
					return asUsage(err)
				}
			}
			if c.IsSet("fair-label") {
				a.FairLabel = c.String("fair-label")
			}
			if c.IsSet("weights") {
				w, err := limits.ParseWeights(c.String("weights"))
				if err != nil {
					return usageErrorf("--weights: %v", err)
				}
				a.Weights = w
			}
			if err := allocationParams(c, &a); err != nil {
				return err
			}
			if err := host.CheckAllocationPolicy(c.Context, st, a.Policy); err != nil {
				if errors.Is(err, host.ErrUnknownPolicy) || errors.Is(err, host.ErrNotAllocation) {
					return asUsage(err)
				}
				return err
			}
			if err := cl.SetAllocation(c.Context, a); err != nil {
				if errors.Is(err, errs.ErrInvalid) {
					return asUsage(err)
				}
				return err
			}
			a, err = cl.Allocation(c.Context)
			if err != nil {
				return err
			}
			return render(c, a, func(w io.Writer) {
				fmt.Fprintf(w, "namespace %s allocates with %s", st.Namespace(), a.Policy)
				if a.FairLabel != "" && a.Policy == "fair" {
					fmt.Fprintf(w, " across label %s", a.FairLabel)
				}
				if len(a.Weights) > 0 && a.Policy == "fair" {
					fmt.Fprintf(w, " (weights %s)", limits.FormatWeights(a.Weights))
				}
				if pl := a.Params[abi.ParamPlacement]; pl != "" {
					fmt.Fprintf(w, ", placement %s", pl)
				}
				fmt.Fprintln(w)
			})
		},
	}
}

func namespaceSnapshotCommand() *cli.Command {
	return &cli.Command{
		Name:      "snapshot",
		Usage:     "write the namespace's allocation snapshot as JSON, for policy dry-run and policy test",
		ArgsUsage: " ",
		Description: `With --allocation, reads (writing nothing) what the leader's next slot
pass would send the allocation policy: the launched runs waiting for slots
(the oldest 500 and the newest 500 of a deeper queue), live workers and
their free slots, the slots in use per group and label value, and the
namespace's parameters. Dry-run a policy against it:

   wasmsched namespace snapshot --allocation > alloc.json
   wasmsched policy dry-run --policy fair --snapshot alloc.json`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "allocation", Usage: "the allocation snapshot (the one kind for now)"},
		},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			if !c.Bool("allocation") {
				return usageErrorf("namespace snapshot: say --allocation (the allocation snapshot; a group's snapshot: policy dry-run --group G)")
			}
			st, _, closeFn, err := openNamespace(c, true)
			if err != nil {
				return err
			}
			defer closeFn()
			snap, _, err := host.AllocationSnapshot(c.Context, st)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			return enc.Encode(policytool.AllocationJSON(snap))
		},
	}
}

// allocationParams applies --param and --placement to a's parameters.
func allocationParams(c *cli.Context, a *client.Allocation) error {
	for _, p := range c.StringSlice("param") {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return usageErrorf("--param %q: want KEY=VALUE", p)
		}
		a.SetParam(k, v)
	}
	if c.IsSet("placement") {
		a.SetParam(abi.ParamPlacement, c.String("placement"))
	}
	return nil
}
