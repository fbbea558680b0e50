package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/digest"
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
	ex := explainJSON{Run: rv, State: rv.State}
	if rv.State != string(storage.StateWaiting) {
		if d := rv.Decision; d != nil {
			ex.Why = fmt.Sprintf("%s by decision %s (epoch %d) of %s %s at %s: %s", d.Action, d.ID, d.Epoch, d.Policy, d.PolicyVersion, d.At, dash(d.Reason))
		} else {
			ex.Why = fmt.Sprintf("%s; no decision of a policy moved it (%s)", rv.State, dash(rv.Reason))
		}
		return ex, nil
	}
	ahead, total, ok, err := st.QueuePosition(ctx, rv.Group, id)
	if err != nil {
		return explainJSON{}, err
	}
	if !ok { // it left the queue meanwhile
		return explainRun(ctx, sb, st, id)
	}
	ex.Ahead, ex.Waiting = &ahead, &total
	sn, err := st.Snapshot(ctx, rv.Group)
	if err != nil {
		return explainJSON{}, storeUsage(err)
	}
	ex.MaxActive = sn.Group.MaxActive
	for _, r := range sn.Active {
		ex.Active = append(ex.Active, toRunJSON(r))
	}
	snap, err := host.SerialSnapshot(sn)
	if err != nil {
		return explainJSON{}, err
	}
	in := false
	for _, r := range snap.Waiting {
		in = in || r.ID == id
	}
	ex.InWindow = &in
	pol, err := resolvePolicy(ctx, st, sn.Group.Policy)
	if err != nil {
		ex.Why = fmt.Sprintf("waits: its group's policy %s cannot be used (%v); fix the policy or the group", sn.Group.Policy, userMessage(err))
		return ex, nil
	}
	ex.Policy = pol.label() + " " + digest.Short(pol.SHA256)
	rt, err := newPolicyRuntime(ctx, sb)
	if err != nil {
		return explainJSON{}, err
	}
	defer rt.Close(context.Background())
	d, err := decide(ctx, rt, pol, snap)
	if err != nil {
		return explainJSON{}, err
	}
	ex.Now = "none"
	for _, a := range d.Actions {
		switch {
		case a.Run == id:
			ex.Now, ex.NowReason = a.Action, a.Reason
		case a.Action == "discard_below" && uint64(rv.Seq) < a.Seq:
			ex.Now, ex.NowReason = "discard_below", a.Reason
		}
	}
	active := len(sn.Active)
	switch {
	case !d.Valid:
		ex.Why = fmt.Sprintf("waits: the policy's decision is %s (%v), so the group is not decided", d.Outcome, d.Errors)
	case ex.Now == "launch":
		ex.Why = "the policy launches it now: it will start as soon as the leader decides the group (and a worker has its slots)"
	case ex.Now == "discard" || ex.Now == "discard_below":
		ex.Why = "the policy discards it on the next decision: " + dash(ex.NowReason)
	case !in:
		ex.Why = fmt.Sprintf("waits: %d runs wait ahead of it, beyond the group's window (the policy sees the oldest and newest %d)", ahead, len(snap.Waiting)/2)
	case active >= max(sn.Group.MaxActive, 1):
		ex.Why = fmt.Sprintf("waits: the group has %d active runs of max_active %d, and %d waiting runs ahead of it", active, max(sn.Group.MaxActive, 1), ahead)
	default:
		ex.Why = fmt.Sprintf("waits: the policy does not launch it now (%d waiting runs ahead, %d active of max_active %d)", ahead, active, max(sn.Group.MaxActive, 1))
	}
	return ex, nil
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
