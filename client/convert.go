package client

import (
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// The one converter from storage's records to the client's (records.go).

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func runOf(r storage.Run) Run {
	out := Run{ID: r.ID, Group: r.Group, Seq: r.Seq, State: string(r.State), Slots: r.Slots, Priority: r.Priority,
		Payload: r.Payload, DurationMS: r.Duration.Milliseconds(), Policy: r.Policy, PolicyVersion: r.PolicyVersion,
		SubmittedAt: timePtr(r.SubmittedAt), LaunchedAt: timePtr(r.LaunchedAt), StartedAt: timePtr(r.StartedAt),
		FinishedAt: timePtr(r.FinishedAt), Reason: r.Reason, Assignments: make([]Assignment, 0, len(r.Assignments))}
	if d := r.Decision; d != nil {
		out.Decision = &Decision{ID: d.ID, Epoch: d.Epoch, At: d.At.UTC(), Action: string(d.Action), Reason: d.Reason,
			Policy: d.Policy, PolicyVersion: d.PolicyVersion, PolicySHA256: d.PolicySHA256, PolicyRegistry: d.PolicyRegistry}
	}
	out.NotBefore, out.TimeoutMS, out.Schedule = timePtr(r.NotBefore), r.Timeout.Milliseconds(), r.Schedule
	out.Result, out.Output, out.ExitCode = r.Result, r.Output, r.ExitCode
	out.Attempt, out.MaxAttempts = max(r.Attempt, 1), max(r.MaxAttempts, 1)
	out.Labels = labelsOf(r.Labels)
	out.Require, out.SameWorker, out.Prefer = limits.LabelsMap(r.Require), r.SameWorker, preferOf(r.Prefer)
	if p := r.Progress; p != nil {
		out.Progress = &Progress{Message: p.Message, At: p.At.UTC()}
		if p.Fraction >= 0 {
			f := p.Fraction
			out.Progress.Fraction = &f
		}
	}
	out.RetryBackoffMS, out.RetryCapMS = r.RetryBase.Milliseconds(), r.RetryCap.Milliseconds()
	out.TraceParent = r.TraceParent
	if r.State == storage.StateRunning && r.Timeout > 0 && !r.StartedAt.IsZero() {
		out.Deadline = timePtr(r.StartedAt.Add(r.Timeout))
	}
	out.Attempts = make([]Attempt, 0, len(r.Attempts))
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, Attempt{N: a.N, Worker: a.Worker, StartedAt: timePtr(a.StartedAt),
			FinishedAt: timePtr(a.FinishedAt), Outcome: string(a.Outcome), Reason: a.Reason})
	}
	// A final run holds no slots (its record keeps the last assignment for
	// the report's replay guard); show what it holds, not what it held.
	if !r.State.Final() {
		for _, a := range r.Assignments {
			out.Assignments = append(out.Assignments, Assignment{Worker: a.Worker, Slot: a.Slot, Token: a.Token, Task: a.Task})
		}
	}
	return out
}

func runsOf(rs []storage.Run) []Run {
	out := make([]Run, 0, len(rs))
	for _, r := range rs {
		out = append(out, runOf(r))
	}
	return out
}

// retentionString is a group's retention as records show it.
func retentionString(d time.Duration) string {
	switch {
	case d < 0:
		return "default"
	case d == 0:
		return "forever"
	}
	return d.String()
}

func groupOf(g storage.Group) Group {
	w := g.Window
	if w == 0 {
		w = limits.DefaultWindow
	}
	return Group{Name: g.Name, Policy: g.Policy, MaxActive: g.MaxActive, Window: w, Retention: retentionString(g.Retention),
		Version: g.Version, Waiting: g.Waiting, Active: g.Active, Delayed: g.Delayed,
		RunTimeoutMS: g.RunTimeout.Milliseconds(), MaxAttempts: g.Retry.MaxAttempts,
		RetryBackoffMS: g.Retry.Base.Milliseconds(), RetryCapMS: g.Retry.Cap.Milliseconds(),
		Paused: g.Paused, PausedAt: timePtr(g.PausedAt), PausedBy: g.PausedBy,
		Params: labelsOf(g.Params), WakeAt: timePtr(g.WakeAt), Require: limits.LabelsMap(g.Require),
		SameWorker: g.SameWorker, Prefer: preferOf(g.Prefer)}
}

// preferOf is ps as records show them: "key=value:weight" (nil: none).
func preferOf(ps []abi.Preference) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = limits.FormatPreference(p)
	}
	return out
}

// parsePrefer reads "key=value[:weight]" preferences (nil for nil).
func parsePrefer(ss []string) ([]abi.Preference, error) {
	if ss == nil {
		return nil, nil
	}
	out := make([]abi.Preference, 0, len(ss))
	for _, s := range ss {
		p, err := limits.ParsePreference(s)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrInvalid)
		}
		out = append(out, p)
	}
	return out, nil
}

// labelsOf is labels (or parameters) as records show them: an object,
// {} when none.
func labelsOf(ls []abi.Label) map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Key] = l.Value
	}
	return m
}

func scheduleOf(s storage.Schedule) Schedule {
	return Schedule{Name: s.Name, Group: s.Group, Cron: s.Cron, TZ: s.TZ, Payload: s.Payload, Priority: s.Priority,
		Slots: max(s.Slots, 1), TimeoutMS: s.Timeout.Milliseconds(), MaxAttempts: s.Retry.MaxAttempts,
		RetryBackoffMS: s.Retry.Base.Milliseconds(), RetryCapMS: s.Retry.Cap.Milliseconds(), Paused: s.Paused,
		Next: timePtr(s.Next), LastTick: timePtr(s.LastTick), LastRun: s.LastRun, Submitted: s.Submitted, Missed: s.Missed,
		CreatedAt: timePtr(s.CreatedAt), UpdatedAt: timePtr(s.UpdatedAt)}
}

func groupDecisionOf(d storage.GroupDecisionRecord) GroupDecision {
	return GroupDecision{At: d.At.UTC(), ID: d.ID, Epoch: d.Epoch, Policy: d.Policy, PolicyVersion: d.PolicyVersion,
		PolicyRegistry: d.PolicyRegistry, Launched: d.Launched, Discarded: d.Discarded, Stopped: d.Stop, DiscardBelow: d.DiscardBelow}
}

func slotsOf(v storage.SlotsView) Slots {
	out := Slots{Workers: make([]Worker, 0, len(v.Workers)), Free: v.Free, Assigned: v.Assigned, Draining: v.Draining}
	for _, w := range v.Workers {
		wk := Worker{Identity: w.Identity, Alive: w.Alive, Draining: w.Draining, Expires: w.Expires.UTC(), Slots: make([]Slot, 0, len(w.Slots)),
			Labels: limits.LabelsMap(w.Placement.Labels), Groups: w.Placement.Groups}
		for _, s := range w.Slots {
			wk.Slots = append(wk.Slots, Slot{Index: s.Index, Run: s.Run, Task: s.Task, Token: s.Token, RunState: string(s.RunState)})
		}
		out.Workers = append(out.Workers, wk)
	}
	return out
}

func policyOf(p storage.Policy, builtin bool) Policy {
	out := Policy{Name: p.Name, Kind: p.Kind, Active: p.Active, Builtin: builtin,
		Versions: make([]PolicyVersion, 0, len(p.Versions)), History: make([]PolicyEvent, 0, len(p.History))}
	for _, v := range p.Versions {
		out.Versions = append(out.Versions, PolicyVersion{Version: v.Version, SHA256: v.SHA256, PushedAt: v.PushedAt.UTC(),
			Who: v.Who, Note: v.Note, Deleted: v.Deleted})
	}
	for _, e := range p.History {
		out.History = append(out.History, PolicyEvent{At: e.At.UTC(), Who: e.Who, Action: e.Action, Version: e.Version, Note: e.Note})
	}
	if a := p.AutoRollback; a != nil {
		out.AutoRollback = &AutoRollback{From: a.From, To: a.To, At: a.At.UTC(), Reason: a.Reason}
	}
	return out
}
