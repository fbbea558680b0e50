package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/policytool"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(groupCommand()))
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
		Subcommands: append([]*cli.Command{
			groupDeleteCommand(),
			groupSnapshotCommand(),
			groupSetCommand(),
			groupListCommand(),
			groupShowCommand(),
		}, groupControlCommands()...),
	}
}

// checkGroupPolicy refuses a policy a serial group cannot use now
// (host.CheckGroupPolicy, the API's check): a slot-reuse one, or a name
// that is neither built in nor pushed with an active version, unless
// --allow-unpushed, which warns instead.
func checkGroupPolicy(c *cli.Context, st *storage.Store, policy string) error {
	err := host.CheckGroupPolicy(c.Context, st, policy)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, host.ErrUnknownPolicy) && c.Bool("allow-unpushed"):
		fmt.Fprintf(c.App.ErrWriter, "wasmsched: warning: %s; accepted (--allow-unpushed)\n", policyProblem(err))
		return nil
	case errors.Is(err, host.ErrUnknownPolicy):
		return usageErrorf("--policy: %s; --allow-unpushed accepts it anyway", policyProblem(err))
	case errors.Is(err, host.ErrNotSerial):
		return usageErrorf("--policy: %s", policyProblem(err))
	}
	return err
}

// checkGroupParams checks the group's parameters after the change against
// what its policy declares (abi/params): exit 2 naming the parameter.
func checkGroupParams(c *cli.Context, st *storage.Store, group, policy string, set map[string]string, replace bool) error {
	return withInspector(c.Context, policytool.Sandbox{}, func(in *host.Inspector) error {
		err := in.CheckGroupChange(c.Context, st, group, policy, set, replace)
		if errors.Is(err, host.ErrInvalidParams) {
			return usageErrorf("--param: %s (nothing written)", paramProblem(err))
		}
		return policytool.LoadError(err)
	})
}

// withInspector runs fn with an Inspector on a policy runtime of sandbox sb,
// both closed after it.
func withInspector(ctx context.Context, sb policytool.Sandbox, fn func(*host.Inspector) error) error {
	rt, err := policytool.NewRuntime(ctx, sb)
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	in := host.NewInspector(rt)
	defer in.Close(context.Background())
	return fn(in)
}

// paramProblem is a parameter check's message without its sentinel.
func paramProblem(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+host.ErrInvalidParams.Error())
}

// policyProblem is host.CheckGroupPolicy's message without its sentinel.
func policyProblem(err error) string {
	msg := err.Error()
	for _, s := range []error{host.ErrUnknownPolicy, host.ErrNotSerial} {
		msg = strings.TrimSuffix(msg, ": "+s.Error())
	}
	return msg
}

// groupDetailTable prints what group show adds to the group's row: its
// active runs, the head of its queue and its latest decisions.
func groupDetailTable(w io.Writer, g client.Group) {
	if g.Paused {
		fmt.Fprintf(w, "\nPAUSED\tsince %s by %s (group resume %s)\n", tableTimeP(g.PausedAt), dash(g.PausedBy), g.Name)
	}
	if g.RunTimeoutMS > 0 || g.MaxAttempts > 1 {
		fmt.Fprintln(w, "\nRUN DEFAULTS")
		if g.RunTimeoutMS > 0 {
			fmt.Fprintf(w, "timeout\t%v\n", time.Duration(g.RunTimeoutMS)*time.Millisecond)
		}
		if g.MaxAttempts > 1 {
			fmt.Fprintf(w, "attempts\t%d (backoff %v, cap %v)\n", g.MaxAttempts, orDefault(g.RetryBackoffMS, limits.DefaultRetryBase),
				orDefault(g.RetryCapMS, limits.DefaultRetryCap))
		}
	}
	if len(g.Params) > 0 {
		fmt.Fprintln(w, "\nPARAM\tVALUE")
		for _, k := range slices.Sorted(maps.Keys(g.Params)) {
			fmt.Fprintf(w, "%s\t%s\n", k, g.Params[k])
		}
	}
	if len(g.Require) > 0 {
		fmt.Fprintf(w, "\nREQUIRE\t%s (its runs go only to workers with these labels)\n", pairs(g.Require))
	}
	if len(g.Prefer) > 0 {
		fmt.Fprintf(w, "\nPREFER\t%s (its runs go to workers with these labels first)\n", strings.Join(g.Prefer, ", "))
	}
	if g.SameWorker {
		fmt.Fprintf(w, "\nSAME WORKER\tyes (all of a run's slots on one worker)\n")
	}
	if g.WakeAt != nil {
		fmt.Fprintf(w, "\nWAKE\tthe policy asked to be decided again at %s\n", tableTimeP(g.WakeAt))
	}
	if len(g.ActiveRuns) > 0 {
		fmt.Fprintln(w, "\nACTIVE\tSTATE\tSEQ\tSTARTED\tSLOTS")
		for _, r := range g.ActiveRuns {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\n", r.ID, r.State, r.Seq, tableTimeP(r.StartedAt), r.Slots)
		}
	}
	if len(g.Queue) > 0 {
		more := ""
		if g.QueueTruncated {
			more = fmt.Sprintf(" (the oldest and newest of %d)", g.QueueTotal)
		}
		fmt.Fprintf(w, "\nWAITING%s\tSEQ\tSUBMITTED\n", more)
		for _, r := range g.Queue {
			fmt.Fprintf(w, "%s\t%d\t%s\n", r.ID, r.Seq, tableTimeP(r.SubmittedAt))
		}
	}
	if len(g.Decisions) == 0 {
		return
	}
	fmt.Fprintln(w, "\nDECIDED\tDECISION\tPOLICY\tLAUNCHED\tDISCARDED\tSTOPPED")
	for _, d := range g.Decisions {
		disc := fmt.Sprint(d.Discarded)
		if d.DiscardBelow > 0 {
			disc += fmt.Sprintf(" + all below seq %d", d.DiscardBelow)
		}
		fmt.Fprintf(w, "%s\t%s\t%s %s\t%d\t%s\t%d\n", tableTime(d.At), d.ID, d.Policy, d.PolicyVersion, d.Launched, disc, d.Stopped)
	}
}

func groupsTable(w io.Writer, gs []client.Group) {
	fmt.Fprintln(w, "NAME\tPOLICY\tMAX_ACTIVE\tWINDOW\tRETENTION\tWAITING\tDELAYED\tACTIVE\tCHANGES")
	for _, g := range gs {
		policy := g.Policy
		if g.Paused {
			policy += " (paused)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", g.Name, policy, g.MaxActive, g.Window, g.Retention, g.Waiting, g.Delayed, g.Active, g.Version)
	}
}

func groupDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a group (refused while it has runs to run, unless --force)",
		ArgsUsage: "G",
		Description: `Deletes group G: its settings and queue. Refused (exit 2) while G has active
runs (LAUNCHED, RUNNING, STOPPING: drain it first, group drain G --stop) or waiting
runs; --force discards the waiting ones (oldest first, recorded with
--reason) and then deletes it. Finished runs keep their records. A later
submit to G creates a new group with the defaults.

Examples:
   wasmsched group delete nightly
   wasmsched group delete nightly --force --reason "workflow retired"`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "discard the group's waiting runs first"},
			&cli.StringFlag{Name: "reason", Value: "group deleted", Usage: "recorded with each discarded run"},
		},
		Action: func(c *cli.Context) error {
			name, st, closeFn, err := groupArg(c)
			if err != nil {
				return err
			}
			defer closeFn()
			n, err := clientOf(st).DeleteGroup(c.Context, name, c.Bool("force"), c.String("reason"))
			if errors.Is(err, errs.ErrNotFound) {
				return usageErrorf("group %s not found in namespace %s", name, st.Namespace())
			}
			if err != nil {
				return err
			}
			res := struct {
				Group     string `json:"group"`
				Deleted   bool   `json:"deleted"`
				Discarded int    `json:"discarded"`
			}{name, true, n}
			return render(c, res, func(w io.Writer) {
				fmt.Fprintf(w, "deleted group %s (%d waiting run(s) discarded)\n", name, n)
			})
		},
	}
}

// groupArg reads a command's one argument G, validates it and opens the
// store (call closeFn when done).
func groupArg(c *cli.Context) (name string, st *storage.Store, closeFn func(), err error) {
	if err := exactArgs(c, 1, "G"); err != nil {
		return "", nil, nil, err
	}
	name = c.Args().First()
	if err := limits.ValidateName("group", name); err != nil {
		return "", nil, nil, asUsage(err)
	}
	st, closeFn, err = openStore(c)
	return name, st, closeFn, err
}

func groupSnapshotCommand() *cli.Command {
	return &cli.Command{
		Name:      "snapshot",
		Usage:     "print the live group's snapshot as the JSON that policy dry-run and policy test read",
		ArgsUsage: "G",
		Description: `Reads group G's snapshot (its active and waiting runs, as the coordinator
sends them to the policy) in one read-only round trip and prints it as JSON
(always JSON: it is meant for a file). Feed it back to replay a production
situation against any policy version, or keep it as a regression scenario:

   wasmsched group snapshot nightly > nightly.json
   wasmsched policy dry-run --policy mypolicy.wasm --snapshot nightly.json
   (add "name" and "expect" to make it a policy test scenario)

Unknown group: exit 2.`,
		Action: func(c *cli.Context) error {
			name, st, closeFn, err := groupArg(c)
			if err != nil {
				return err
			}
			defer closeFn()
			snap, err := host.LiveSnapshot(c.Context, st, name)
			if errors.Is(err, host.ErrUnknownGroup) {
				return usageErrorf("group %s not found in namespace %s", name, st.Namespace())
			}
			if err != nil {
				return err
			}
			return writeJSON(c.App.Writer, policytool.SnapshotJSON(snap))
		},
	}
}

func groupSetCommand() *cli.Command {
	return &cli.Command{
		Name:      "set",
		Usage:     "create a group or change its policy / max_active",
		ArgsUsage: "G",
		Description: `Creates group G, or changes the settings given as flags and keeps the others.
A new group defaults to policy "wait" and max_active 1.

The policy must be a serial one: a built-in (wait: oldest first, up to
max_active; discard: the oldest runs, newer waiting runs discarded; priority:
DolphinScheduler's "newest wins", the newest waiting run launches and older
ones are discarded or stopped; none of them reads a run's --priority) or a
pushed serial policy. An unknown name or a slot-reuse policy exits 2; with
--allow-unpushed a name not pushed yet is accepted with a warning (the group's
runs wait until it is pushed). For priority order, push the example
examples/oldest-first-by-priority.

--window N bounds what one decision reads of a deep group: when more than
2·N runs wait, the policy sees the oldest N and the newest N (each at least
max_active) and the total; the built-ins still act on every run (discard and
priority discard the rest with one discard_below). Default 16.

--retention D: the leader removes the group's finished runs (SUCCEEDED,
FAILED, STOPPED, DISCARDED) D after they finished, with every index entry;
0 keeps them forever, "default" returns to the leader's serve --retention.

--run-timeout D, --max-attempts N, --retry-backoff D, --retry-cap D are the
defaults of the runs submitted afterwards without their own (see submit
--help): each attempt stopped after D, up to N attempts with backoff.
--run-timeout 0 removes the timeout; --max-attempts 1 the retries.

--param NAME=VALUE (repeatable, at most 32 in all) sets a setting of the
group's policy; NAME= (no value) removes it, --replace-params makes the ones
given all of them (none given: removes every one). The policy sees them in
each decision (ABI v4), so one built module serves every group however it is
tuned; a new --policy keeps them. Names and values are bounded as labels
are (see submit --help). The catalog under examples/ names each policy's.

Examples:
   wasmsched group set nightly
   wasmsched group set nightly --policy priority
   wasmsched group set etl --policy discard --max-active 1 -o json
   wasmsched group set etl --run-timeout 20m --max-attempts 3 --retry-backoff 30s
   wasmsched group set hooks --policy debounce --param period=2s --param max_wait=30s
   wasmsched group set train --require gpu=a100 --require zone=eu
   wasmsched group set web --prefer region=eu:10 --prefer disk=ssd:2

--require K=V places the group's runs only on workers that carry every
label given (worker --label); the runs launched from then on follow the
change. Without a worker that has them, the runs wait (LAUNCHED), and they
never hold other runs' slots.

--prefer K=V[:W] is soft: among the workers that may take a run and have its
slots free, one whose labels score the highest sum of weights W (1 to 1000,
default 1) gets it; with none of them free the run goes anywhere it may.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "policy", Aliases: []string{"p"}, Usage: "serial policy `NAME` (wait, discard, priority, or a pushed one)"},
			&cli.IntFlag{Name: "max-active", Aliases: []string{"m"}, Usage: fmt.Sprintf("at most `N` (1 to %d) active runs (a new group: 1)", limits.MaxMaxActive), DefaultText: "kept"},
			&cli.StringFlag{Name: "retention", Usage: "keep the group's finished runs for `D` (36h, 7d), 0 = forever, default = the leader's serve --retention (7d unless set)", DefaultText: "kept"},
			&cli.IntFlag{Name: "window", Usage: fmt.Sprintf("a decision sees the oldest and the newest `N` (1 to %d) waiting runs of a deeper group (a new group: %d)", limits.MaxWindow, limits.DefaultWindow), DefaultText: "kept"},
			&cli.BoolFlag{Name: "allow-unpushed", Usage: "accept a --policy name that is not pushed yet (its runs wait until it is)"},
			&cli.StringSliceFlag{Name: "param", Usage: "set the policy's parameter `NAME=VALUE` (repeatable; NAME= removes it)"},
			&cli.BoolFlag{Name: "replace-params", Usage: "the --param given become all of the group's parameters"},
			&cli.StringSliceFlag{Name: "require", Usage: "its runs go only to workers with the label `K=V` (repeatable: every one; replaces the group's requirements)"},
			&cli.BoolFlag{Name: "no-require", Usage: "drop the group's requirements: any worker that serves it may run its runs"},
			&cli.BoolFlag{Name: "same-worker", Usage: "put all the slots of each of its runs on one worker (--same-worker=false: any workers)"},
			&cli.StringSliceFlag{Name: "prefer", Usage: "its runs go first to workers with the label `K=V[:W]` (weight W 1 to 1000, default 1; repeatable: weights add up; replaces the group's preferences)"},
			&cli.BoolFlag{Name: "no-prefer", Usage: "drop the group's preferences"},
		}, runTimeFlags("run-")...),
		Action: groupSet,
	}
}

func groupListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list groups",
		ArgsUsage: " ",
		Description: `One line a group: its policy (and whether it is paused), max_active, the
window its policy sees, retention, its waiting, delayed and active runs, and
CHANGES: how many times the group changed (its version, "version" in json:
a decision made from an older one is not applied), not a policy version.

Examples:
   wasmsched group list
   wasmsched group list -o json`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 0, "none"); err != nil {
				return err
			}
			_, cl, closeFn, err := openNamespace(c, true)
			if err != nil {
				return err
			}
			defer closeFn()
			gs, err := cl.Groups(c.Context)
			if err != nil {
				return err
			}
			return render(c, gs, func(w io.Writer) { groupsTable(w, gs) })
		},
	}
}

func groupShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one group",
		ArgsUsage: "G",
		Description: `Unknown group: exit 2.

Examples:
   wasmsched group show nightly
   wasmsched group show nightly -o json`,
		Action: func(c *cli.Context) error {
			name, st, closeFn, err := groupArg(c)
			if err != nil {
				return err
			}
			defer closeFn()
			g, err := clientOf(st).Group(c.Context, name)
			if errors.Is(err, errs.ErrNotFound) {
				return usageErrorf("group %s not found in namespace %s", name, st.Namespace())
			}
			if err != nil {
				return err
			}
			return render(c, g, func(w io.Writer) { groupsTable(w, []client.Group{g}); groupDetailTable(w, g) })
		},
	}
}

func groupSet(c *cli.Context) error {
	if err := exactArgs(c, 1, "G"); err != nil {
		return err
	}
	maxActive := 0
	if c.IsSet("max-active") {
		maxActive = c.Int("max-active")
		if maxActive == 0 { // 0 keeps the current value; storage checks the range
			return usageErrorf("--max-active 0: a group runs at least 1 (leave the flag out to keep the current value)")
		}
	}
	window := 0
	if c.IsSet("window") {
		window = c.Int("window")
		if window == 0 { // 0 keeps the current value; storage checks the range
			return usageErrorf("--window 0: a policy sees at least 1 run (leave the flag out to keep the current value)")
		}
	}
	var retention *time.Duration
	if c.IsSet("retention") {
		d, err := client.ParseRetention(c.String("retention"), true)
		if err != nil {
			return usageErrorf("--retention: %v", err)
		}
		retention = &d
	}
	timeout, r, err := runTimeOf(c, "run-")
	if err != nil {
		return err
	}
	var retry *client.Retry
	if c.IsSet("max-attempts") || c.IsSet("retry-backoff") || c.IsSet("retry-cap") {
		retry = &r
		if r.MaxAttempts == 1 {
			retry = &client.Retry{} // no retries
		}
	}
	params, err := labelFlags(c, "param", abi.MaxParams)
	if err != nil {
		return err
	}
	require, prefer, err := groupPlacementFlags(c)
	if err != nil {
		return err
	}
	policy := c.String("policy")
	if c.IsSet("policy") {
		if err := limits.ValidateName("policy", policy); err != nil {
			return asUsage(err)
		}
	}
	name := c.Args().First()
	if err := limits.ValidateName("group", name); err != nil {
		return asUsage(err)
	}
	st, cl, closeFn, err := openNamespace(c, false)
	if err != nil {
		return err
	}
	defer closeFn()
	if c.IsSet("policy") {
		if err := checkGroupPolicy(c, st, policy); err != nil {
			return err
		}
	}
	gs := client.GroupSettings{Policy: policy, MaxActive: maxActive, Window: window,
		Retention: retention, RunTimeout: timeout, Retry: retry, ReplaceParams: c.Bool("replace-params"), Require: require,
		Prefer: prefer}
	if c.IsSet("same-worker") {
		same := c.Bool("same-worker")
		gs.SameWorker = &same
	}
	if c.IsSet("param") || gs.ReplaceParams {
		gs.Params = limits.LabelsMap(params)
		if gs.Params == nil {
			gs.Params = map[string]string{}
		}
	}
	if c.IsSet("param") || gs.ReplaceParams || c.IsSet("policy") {
		if err := checkGroupParams(c, st, name, policy, gs.Params, gs.ReplaceParams); err != nil {
			return err
		}
	}
	g, err := cl.SetGroup(c.Context, name, gs)
	if err != nil {
		return err
	}
	return render(c, g, func(w io.Writer) { groupsTable(w, []client.Group{g}) })
}

// groupPlacementFlags reads group set's --require/--no-require and
// --prefer/--no-prefer: nil keeps the group's, empty drops them.
func groupPlacementFlags(c *cli.Context) (require map[string]string, prefer []string, err error) {
	switch {
	case c.IsSet("require") && c.Bool("no-require"):
		return nil, nil, usageErrorf("--require and --no-require are exclusive")
	case c.IsSet("require"):
		ls, err := labelFlags(c, "require", abi.MaxLabels)
		if err != nil {
			return nil, nil, err
		}
		require = limits.LabelsMap(ls)
	case c.Bool("no-require"):
		require = map[string]string{}
	}
	switch {
	case c.IsSet("prefer") && c.Bool("no-prefer"):
		return nil, nil, usageErrorf("--prefer and --no-prefer are exclusive")
	case c.IsSet("prefer"):
		prefer = c.StringSlice("prefer")
		for _, p := range prefer {
			if _, err := limits.ParsePreference(p); err != nil {
				return nil, nil, usageErrorf("--prefer: %v", err)
			}
		}
	case c.Bool("no-prefer"):
		prefer = []string{}
	}
	return require, prefer, nil
}

// orDefault is ms as a duration, or def when 0.
func orDefault(ms int64, def time.Duration) time.Duration {
	if ms == 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}
