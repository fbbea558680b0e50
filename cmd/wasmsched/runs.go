package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(runsCommand()), withInterspersed(runCommand()))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseState parses a run state name (case-insensitive).
func parseState(s string) (storage.State, error) {
	for _, st := range client.States {
		if strings.EqualFold(s, st) {
			return storage.State(st), nil
		}
	}
	return "", usageErrorf("--state %q is not a run state; valid states: %s", s, strings.Join(client.States, ", "))
}

// --- runs ---

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:      "runs",
		Usage:     "list runs, newest first",
		ArgsUsage: " ",
		Description: `Lists the namespace's runs, newest (highest seq) first, optionally only
one group's or only those in one state.

States: WAITING, LAUNCHED, RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED,
DISCARDED. In json, times are RFC 3339 (UTC) and a time not reached yet is
null.

Pages: at most --limit runs are listed; when older runs exist, a hint on
stderr names the next page, both as --after SEQ (the runs older than seq
SEQ) and as --cursor C (an opaque cursor that also carries --group and
--state, so the next page cannot be asked with other filters by mistake).

Watch: --watch lists the page, then follows the namespace's run events and
prints each run that changes state (matching --group and --state) as it
changes, until interrupted (Ctrl-C: exit 0). With -o json it prints one
compact JSON run per line (the page first, then each change). Events are
pushed by the scripts (no polling); when the watch falls behind or its
connection drops, it says so on stderr and lists the page again.

Examples:
   wasmsched runs
   wasmsched runs --group nightly --state WAITING
   wasmsched runs --label ref=main --label tenant=acme
   wasmsched runs --limit 5 -o json
   wasmsched runs --limit 100 --after 48213
   wasmsched runs --cursor c1.bmlnaHRseQAAMTIz
   wasmsched runs --group nightly --watch`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "only runs of group `G`"},
			&cli.StringFlag{Name: "state", Aliases: []string{"s"}, Usage: "only runs in state `S`"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "only runs with label `K=V` (repeatable: all of them)"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most `N` runs (0 = all)"},
			&cli.Int64Flag{Name: "after", Usage: "list the runs after (older than) the run of seq `SEQ`: the next page"},
			&cli.StringFlag{Name: "cursor", Usage: "list the page cursor `C` names (printed with the previous page)"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "after the page, print each run as it changes state, until interrupted"},
		},
		Action: listRunsAction,
	}
}

// requireNamespace refuses a namespace nothing was ever written in: a
// mistyped --namespace would otherwise list nothing and exit 0.
func requireNamespace(ctx context.Context, st *storage.Store) error {
	ok, err := clientOf(st).Exists(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return usageErrorf("namespace %s does not exist (no group, run, policy, worker or leader in it yet; --namespace or WASMSCHED_NAMESPACE)", st.Namespace())
	}
	return nil
}

// listRuns lists up to limit runs (0 = all) matching o, newest first, in
// pages of client.MaxListLimit, and returns the last page read.
func listRuns(ctx context.Context, c *client.Client, o client.ListOptions, limit int) ([]client.Run, client.Page, error) {
	out := []client.Run{}
	for {
		o.Limit = client.MaxListLimit
		if limit > 0 {
			o.Limit = min(limit-len(out), client.MaxListLimit)
		}
		p, err := c.List(ctx, o)
		if err != nil {
			return nil, p, err
		}
		out = append(out, p.Runs...)
		if !p.More || (limit > 0 && len(out) >= limit) {
			return out, p, nil
		}
		o.Cursor, o.After, o.Group, o.State, o.Labels = p.Next, 0, "", "", nil
	}
}

// limitFlag repeats --limit for a next page named by cursor.
func limitFlag(c *cli.Context) string {
	if c.IsSet("limit") {
		return " --limit " + c.String("limit")
	}
	return ""
}

// trimStorage drops the "storage: " prefix of a storage error's message.
func trimStorage(err error) string { return strings.TrimPrefix(err.Error(), "storage: ") }

// pageFlags repeats the filter flags of a runs command for its next page.
func pageFlags(c *cli.Context) string {
	var b strings.Builder
	for _, f := range []string{"group", "state", "limit"} {
		if c.IsSet(f) {
			fmt.Fprintf(&b, " --%s %s", f, c.String(f))
		}
	}
	for _, l := range c.StringSlice("label") {
		fmt.Fprintf(&b, " --label %q", l)
	}
	return b.String()
}

// runColumns are the columns of runsTable; runs --watch pads its rows to
// their widths (a watch prints row by row, so no tabwriter can align it).
var runColumns = []struct {
	name  string
	width int
}{{"ID", 20}, {"GROUP", 14}, {"SEQ", 7}, {"STATE", 9}, {"SLOTS", 5}, {"PRIO", 4}, {"ATTEMPT", 7}, {"POLICY", 8},
	{"SUBMITTED", 23}, {"DUE", 23}, {"STARTED", 23}, {"FINISHED", 23}, {"REASON", 0}}

func runsTable(w io.Writer, rs []client.Run) {
	names := make([]string, len(runColumns))
	for i, c := range runColumns {
		names[i] = c.name
	}
	fmt.Fprintln(w, strings.Join(names, "\t"))
	for _, r := range rs {
		fmt.Fprintln(w, strings.Join(runCells(r, r.State), "\t"))
	}
}

// runCells is one row of runsTable; state is the state to show (runs
// --watch shows the state an event announced).
func runCells(r client.Run, state string) []string {
	attempt := strconv.Itoa(max(r.Attempt, 1))
	if r.MaxAttempts > 1 {
		attempt += "/" + strconv.Itoa(r.MaxAttempts)
	}
	due := "-" // a WAITING run not due yet: when it is (a delay, or its retry)
	if r.NotBefore != nil && r.State == string(storage.StateWaiting) && r.NotBefore.After(time.Now()) {
		due = tableTimeP(r.NotBefore)
	}
	return []string{r.ID, r.Group, strconv.FormatInt(r.Seq, 10), state, strconv.Itoa(r.Slots), strconv.Itoa(r.Priority), attempt,
		dash(r.Policy), tableTimeP(r.SubmittedAt), due, tableTimeP(r.StartedAt), tableTimeP(r.FinishedAt), dash(r.Reason)}
}

// tableTime is a time in tables: UTC, to the millisecond, "-" when zero.
func tableTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// tableTimeP is tableTime of a record's optional time.
func tableTimeP(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return tableTime(*t)
}

// --- run show / run stop ---

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "show, explain or stop one run",
		Description: `Examples:
   wasmsched run show r42
   wasmsched run explain r42
   wasmsched run stop r42 --reason "bad input"`,
		Subcommands: []*cli.Command{
			runExplainCommand(), // explain.go
			{
				Name:      "show",
				Usage:     "show one run with its slot assignments",
				ArgsUsage: "ID",
				Description: `Shows the run's fields and its task-slot assignments (worker identity,
slot index, assignment token; task 0 first). Unknown id: exit 2.

Examples:
   wasmsched run show r42
   wasmsched run show r42 -o json`,
				Action: func(c *cli.Context) error {
					if err := exactArgs(c, 1, "ID"); err != nil {
						return err
					}
					st, _, closeFn, err := openNamespace(c, false)
					if err != nil {
						return err
					}
					defer closeFn()
					r, err := showRun(c.Context, st, c.Args().First())
					if err != nil {
						return err
					}
					return render(c, r, func(w io.Writer) { runShowTable(w, r) })
				},
			},
			runRetryCommand(),
			{
				Name:      "stop",
				Usage:     "stop a run: discard it if WAITING, stop it if LAUNCHED or RUNNING",
				ArgsUsage: "ID",
				Description: `Asks for a run to end. A WAITING run is DISCARDED at once; a LAUNCHED or
RUNNING run goes to STOPPING, its worker kills it and reports STOPPED. A run
that has already finished (or is already stopping) is an error (exit 2).

Examples:
   wasmsched run stop r42
   wasmsched run stop r42 --reason "superseded by r43" -o json`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Usage: "why (recorded with the run)", Value: "stopped by operator"},
				},
				Action: func(c *cli.Context) error {
					if err := exactArgs(c, 1, "ID"); err != nil {
						return err
					}
					st, _, closeFn, err := openNamespace(c, false)
					if err != nil {
						return err
					}
					defer closeFn()
					r, err := stopRun(c.Context, st, c.Args().First(), c.String("reason"))
					if err != nil {
						return err
					}
					return render(c, r, func(w io.Writer) {
						fmt.Fprintf(w, "run %s is %s\n", r.ID, r.State)
					})
				},
			},
		},
	}
}

// showRun reads one run with its assignments.
func showRun(ctx context.Context, st *storage.Store, id string) (client.Run, error) {
	if err := limits.ValidateName("run", id); err != nil {
		return client.Run{}, asUsage(err)
	}
	r, err := clientOf(st).Get(ctx, id)
	if errors.Is(err, errs.ErrNotFound) {
		return r, usageErrorf("run %s not found in namespace %s (expired or never existed)", id, st.Namespace())
	}
	return r, err
}

// stopRun requests a stop (or discard) of run id: a read and the stop.
func stopRun(ctx context.Context, st *storage.Store, id, reason string) (client.Run, error) {
	if err := limits.ValidateName("run", id); err != nil {
		return client.Run{}, asUsage(err)
	}
	c := clientOf(st)
	// RequestStop answers STOPPING both for a run it moved there and for one
	// already STOPPING (it is idempotent under replay): tell them apart
	// first, as the help promises.
	if cur, err := c.Get(ctx, id); err == nil && cur.State == string(storage.StateStopping) {
		return client.Run{}, usageErrorf("run %s is already STOPPING (its worker is stopping it)", id)
	}
	r, err := c.Stop(ctx, id, reason)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return r, usageErrorf("run %s not found in namespace %s (expired or never existed)", id, st.Namespace())
	case errors.Is(err, errs.ErrBadState): // "run r1 is SUCCEEDED: it can no longer be stopped"
		return r, asUsage(err)
	}
	return r, err
}

func runShowTable(w io.Writer, r client.Run) {
	fmt.Fprintf(w, "ID\t%s\n", r.ID)
	fmt.Fprintf(w, "GROUP\t%s\n", r.Group)
	fmt.Fprintf(w, "SEQ\t%d\n", r.Seq)
	fmt.Fprintf(w, "STATE\t%s\n", r.State)
	fmt.Fprintf(w, "SLOTS\t%d\n", r.Slots)
	fmt.Fprintf(w, "PRIORITY\t%d\n", r.Priority)
	fmt.Fprintf(w, "PAYLOAD\t%s\n", dash(r.Payload))
	if r.DurationMS > 0 {
		fmt.Fprintf(w, "DURATION\t%v (submit --duration: how long a simulating worker takes)\n", time.Duration(r.DurationMS)*time.Millisecond)
	}
	fmt.Fprintf(w, "POLICY\t%s %s\n", dash(r.Policy), r.PolicyVersion)
	fmt.Fprintf(w, "SUBMITTED\t%s\n", tableTimeP(r.SubmittedAt))
	fmt.Fprintf(w, "LAUNCHED\t%s\n", tableTimeP(r.LaunchedAt))
	fmt.Fprintf(w, "STARTED\t%s\n", tableTimeP(r.StartedAt))
	fmt.Fprintf(w, "FINISHED\t%s\n", tableTimeP(r.FinishedAt))
	if r.StartedAt != nil && r.FinishedAt != nil {
		fmt.Fprintf(w, "RAN FOR\t%v\n", r.FinishedAt.Sub(*r.StartedAt))
	}
	fmt.Fprintf(w, "REASON\t%s\n", dash(r.Reason))
	if p := r.Progress; p != nil {
		pct := "-"
		if p.Fraction != nil {
			pct = fmt.Sprintf("%.0f%%", *p.Fraction*100)
		}
		fmt.Fprintf(w, "PROGRESS\t%s %s (at %s)\n", pct, p.Message, tableTime(p.At))
	}
	if r.TraceParent != "" {
		if parts := strings.Split(r.TraceParent, "-"); len(parts) == 4 {
			fmt.Fprintf(w, "TRACE\t%s (submit span %s)\n", parts[1], parts[2])
		}
	}
	if len(r.Require) > 0 {
		fmt.Fprintf(w, "REQUIRE\t%s (and its group's)\n", pairs(r.Require))
	}
	if len(r.Prefer) > 0 {
		fmt.Fprintf(w, "PREFER\t%s (and its group's)\n", strings.Join(r.Prefer, ", "))
	}
	if r.SameWorker {
		fmt.Fprintf(w, "SAME WORKER\tyes (all of its slots on one worker)\n")
	}
	runTimeTable(w, r)
	if d := r.Decision; d != nil {
		src := "built-in"
		if d.PolicyRegistry > 0 {
			src = fmt.Sprintf("registry v%d", d.PolicyRegistry)
		}
		fmt.Fprintf(w, "\nDECISION\t%s (epoch %d) at %s: %s\n", d.ID, d.Epoch, tableTime(d.At), d.Action)
		fmt.Fprintf(w, "BY\t%s %s (%s, sha256 %s)\n", d.Policy, d.PolicyVersion, src, d.PolicySHA256)
		fmt.Fprintf(w, "BECAUSE\t%s\n", dash(d.Reason))
	}
	if len(r.Assignments) > 0 {
		fmt.Fprintln(w, "\nTASK\tWORKER\tSLOT\tTOKEN")
		for _, a := range r.Assignments {
			fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", a.Task, a.Worker, a.Slot, a.Token)
		}
	}
}

// oneLine is s on one line, cut at n bytes ("... (N bytes)" when cut; -o
// json has all of it).
func oneLine(s string, n int) string {
	t := strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")
	if len(t) > n {
		return fmt.Sprintf("%s... (%d bytes; -o json has all)", t[:n], len(s))
	}
	return t
}

// runTimeTable prints a run's time settings and attempts (only what is set).
func runTimeTable(w io.Writer, r client.Run) {
	if r.NotBefore != nil {
		note := ""
		if r.State == string(storage.StateWaiting) {
			if d := time.Until(*r.NotBefore); d > 0 {
				note = fmt.Sprintf(" (due in %v)", d.Round(time.Second))
			}
		}
		fmt.Fprintf(w, "NOT BEFORE\t%s%s\n", tableTimeP(r.NotBefore), note)
	}
	if r.TimeoutMS > 0 {
		fmt.Fprintf(w, "TIMEOUT\t%v\n", time.Duration(r.TimeoutMS)*time.Millisecond)
	}
	if r.Deadline != nil {
		fmt.Fprintf(w, "DEADLINE\t%s\n", tableTimeP(r.Deadline))
	}
	if r.Schedule != "" {
		fmt.Fprintf(w, "SCHEDULE\t%s\n", r.Schedule)
	}
	if len(r.Labels) > 0 {
		var b strings.Builder
		for i, k := range slices.Sorted(maps.Keys(r.Labels)) {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(k + "=" + r.Labels[k])
		}
		fmt.Fprintf(w, "LABELS\t%s\n", oneLine(b.String(), 400))
	}
	if r.ExitCode != nil {
		fmt.Fprintf(w, "EXIT CODE\t%d\n", *r.ExitCode)
	}
	if r.Result != "" {
		fmt.Fprintf(w, "RESULT\t%s\n", oneLine(r.Result, 200))
	}
	if r.Output != "" {
		fmt.Fprintln(w, "\nOUTPUT (last 4 KiB)")
		for _, l := range strings.Split(strings.TrimRight(r.Output, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if r.MaxAttempts > 1 {
		fmt.Fprintf(w, "ATTEMPT\t%d of %d (backoff %v, cap %v)\n", r.Attempt, r.MaxAttempts,
			time.Duration(r.RetryBackoffMS)*time.Millisecond, time.Duration(r.RetryCapMS)*time.Millisecond)
	}
	if len(r.Attempts) > 0 {
		fmt.Fprintln(w, "\nATTEMPT\tOUTCOME\tWORKER\tSTARTED\tFINISHED\tREASON")
		for _, a := range r.Attempts {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", a.N, a.Outcome, dash(a.Worker), tableTimeP(a.StartedAt), tableTimeP(a.FinishedAt), dash(a.Reason))
		}
	}
}

// interspersed wraps an Action so the command's flags may also follow its
// positional arguments (`submit G --slots 2 --redis U`): urfave/cli v2 stops
// parsing flags at the first positional argument. It re-parses the flags
// already parsed plus the remaining arguments, moving flags ahead of
// positionals; everything after a literal "--" stays positional.
func interspersed(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		rest := c.Args().Slice()
		if !slices.ContainsFunc(rest, func(a string) bool { return strings.HasPrefix(a, "-") && a != "-" }) {
			return action(c)
		}
		set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
		set.SetOutput(io.Discard)
		for _, f := range c.Command.Flags {
			if err := f.Apply(set); err != nil {
				return err
			}
		}
		var args []string
		for _, f := range c.Command.Flags { // once per flag, by its first name
			name := f.Names()[0]
			if fl := set.Lookup(name); fl == nil || !c.IsSet(name) {
				continue
			} else if _, repeat := fl.Value.(*cli.StringSlice); repeat { // each value once
				for _, e := range c.StringSlice(name) {
					args = append(args, "--"+name+"="+e)
				}
			} else if v := c.Value(name); v != nil {
				args = append(args, "--"+name+"="+flagString(v))
			}
		}
		args = append(args, rest...)
		var pos []string
		for {
			if err := set.Parse(args); err != nil {
				return flagError(c, err)
			}
			left := set.Args()
			if len(left) == 0 {
				break
			}
			if i := len(args) - len(left); i > 0 && args[i-1] == "--" {
				pos = append(pos, left...)
				break
			}
			pos = append(pos, left[0])
			args = left[1:]
		}
		if err := set.Parse(append([]string{"--"}, pos...)); err != nil {
			return flagError(c, err)
		}
		// Like urfave's own parsing, give every alias of a set flag its value.
		visited := map[string]bool{}
		set.Visit(func(f *flag.Flag) { visited[f.Name] = true })
		for _, f := range c.Command.Flags {
			names := f.Names()
			for _, n := range names {
				if !visited[n] {
					continue
				}
				if _, ok := set.Lookup(n).Value.(*cli.StringSlice); ok {
					break // a repeatable flag's names share one value
				}
				v := set.Lookup(n).Value.String()
				for _, other := range names {
					if other != n {
						_ = set.Set(other, v)
					}
				}
				break
			}
		}
		var parent *cli.Context
		if lin := c.Lineage(); len(lin) > 1 {
			parent = lin[1]
		}
		nc := cli.NewContext(c.App, set, parent)
		nc.Command = c.Command
		nc.Context = c.Context
		return action(nc)
	}
}

// flagString renders a parsed flag value back into command-line form.
func flagString(v any) string {
	switch x := v.(type) {
	case time.Duration:
		return x.String()
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// withInterspersed wraps the Action of cmd and of all its subcommands with
// interspersed.
func withInterspersed(cmd *cli.Command) *cli.Command {
	if cmd.Action != nil {
		cmd.Action = interspersed(cmd.Action)
	}
	for _, sc := range cmd.Subcommands {
		withInterspersed(sc)
	}
	return cmd
}

func listRunsAction(c *cli.Context) error {
	if err := exactArgs(c, 0, "none"); err != nil {
		return err
	}
	o := client.ListOptions{Group: c.String("group"), After: c.Int64("after")}
	labels, err := labelFlags(c, "label", abi.MaxLabels)
	if err != nil {
		return err
	}
	o.Labels = limits.LabelsMap(labels)
	limit := c.Int("limit")
	if limit < 0 {
		return usageErrorf("--limit must be >= 0, got %d", limit)
	}
	if o.After < 0 || (c.IsSet("after") && o.After == 0) {
		return usageErrorf("--after must be a seq >= 1, got %d", o.After)
	}
	if c.IsSet("cursor") {
		if c.IsSet("after") {
			return usageErrorf("--cursor and --after both name a page: give one")
		}
		cf, err := storage.ParseCursor(c.String("cursor"))
		if err != nil {
			return usageErrorf("--cursor: %v", trimStorage(err))
		}
		if c.IsSet("group") && o.Group != cf.Group {
			return usageErrorf("--cursor continues a listing of group %q, not --group %q", cf.Group, o.Group)
		}
		if s := c.String("state"); c.IsSet("state") && !strings.EqualFold(s, string(cf.State)) {
			return usageErrorf("--cursor continues a listing of state %q, not --state %q", cf.State, s)
		}
		o.Cursor, o.Group = c.String("cursor"), cf.Group
		if cf.State != "" {
			_ = c.Set("state", string(cf.State))
		}
	}
	if o.Group != "" {
		if err := limits.ValidateName("group", o.Group); err != nil {
			return asUsage(err)
		}
	}
	if s := c.String("state"); s != "" {
		st, err := parseState(s)
		if err != nil {
			return err
		}
		o.State = string(st)
	}
	st, cl, closeFn, err := openNamespace(c, true)
	if err != nil {
		return err
	}
	defer closeFn()
	if o.Group != "" && o.Cursor == "" {
		// a filter, not a lookup: a group not made yet (runs --watch waits
		// for its first run) or deleted (its runs are kept until their
		// retention) lists what runs it has; a warning catches a typo
		if _, err := cl.Group(c.Context, o.Group); errors.Is(err, client.ErrNotFound) {
			fmt.Fprintf(c.App.ErrWriter, "wasmsched: warning: group %s does not exist in namespace %s (not made yet, or deleted): listing the runs it has\n",
				o.Group, st.Namespace())
		}
	}
	if c.Bool("watch") {
		return watchRuns(c, cl, o, limit)
	}
	rs, p, err := listRuns(c.Context, cl, o, limit)
	if err != nil {
		return err
	}
	if err := render(c, rs, func(w io.Writer) { runsTable(w, rs) }); err != nil {
		return err
	}
	if p.More {
		last := rs[len(rs)-1].Seq
		fmt.Fprintf(c.App.ErrWriter, "wasmsched: more runs; the next page: wasmsched runs%s --after %d (or: wasmsched runs --cursor %s%s)\n",
			pageFlags(c), last, p.Next, limitFlag(c))
	}
	return nil
}

// runRetryCommand is run retry.
func runRetryCommand() *cli.Command {
	return &cli.Command{
		Name:      "retry",
		Usage:     "retry a FAILED or STOPPED run: back to WAITING as its next attempt",
		ArgsUsage: "ID",
		Description: `Puts a finished run back to WAITING as a new attempt of the same run: its
attempt count goes on, its earlier attempts stay in its record (run show),
and its group's policy decides it like any waiting run. A run that is not
FAILED or STOPPED is an error (exit 2). group retry retries many.

Examples:
   wasmsched run retry r42
   wasmsched run retry r42 --who alice -o json`,
		Flags: []cli.Flag{whoFlag("retried it")},
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "ID"); err != nil {
				return err
			}
			_, cl, closeFn, err := openNamespace(c, false)
			if err != nil {
				return err
			}
			defer closeFn()
			r, err := cl.Retry(c.Context, c.Args().First(), whoOf(c))
			if err != nil {
				return err
			}
			return render(c, r, func(w io.Writer) {
				fmt.Fprintf(w, "run %s is %s (attempt %d of %d)\n", r.ID, r.State, r.Attempt, r.MaxAttempts)
			})
		},
	}
}
