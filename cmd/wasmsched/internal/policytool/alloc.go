package policytool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// The JSON form of an allocation snapshot (namespace snapshot
// --allocation writes it, policy dry-run --snapshot and policy test's
// "allocation" scenarios read it): {"kind": "allocation", "now", "free",
// "total", "launched_total", "oldest", "runs": [{"id", "group", "seq",
// "launched_at", "priority", "slots", "labels", "require"}], "workers":
// [{"worker", "slots", "free", "labels", "groups"}], "usage": [{"key",
// "value", "slots", "runs"}], "params": {"name": "value"}}.

// AllocationOut is the JSON form of an allocation snapshot as written.
type AllocationOut struct {
	Kind          string            `json:"kind"`
	Now           string            `json:"now"`
	Free          uint32            `json:"free"`
	Total         uint32            `json:"total"`
	LaunchedTotal uint32            `json:"launched_total"`
	Oldest        uint32            `json:"oldest"`
	Runs          []allocRunOut     `json:"runs"`
	Workers       []workerOut       `json:"workers"`
	Usage         []usageOut        `json:"usage"`
	Params        map[string]string `json:"params,omitempty"`
}

type allocRunOut struct {
	ID         string            `json:"id"`
	Group      string            `json:"group"`
	Seq        uint64            `json:"seq"`
	LaunchedAt string            `json:"launched_at,omitempty"`
	Priority   int32             `json:"priority"`
	Slots      uint32            `json:"slots"`
	Labels     map[string]string `json:"labels,omitempty"`
	Require    map[string]string `json:"require,omitempty"`
	Prefer     []string          `json:"prefer,omitempty"`
}

type workerOut struct {
	Worker string            `json:"worker"`
	Slots  uint32            `json:"slots"`
	Free   uint32            `json:"free"`
	Labels map[string]string `json:"labels,omitempty"`
	Groups []string          `json:"groups,omitempty"`
}

type usageOut struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Slots uint32 `json:"slots"`
	Runs  uint32 `json:"runs"`
}

// AllocationJSON is the JSON form of s.
func AllocationJSON(s *abi.AllocationSnapshot) AllocationOut {
	out := AllocationOut{Kind: "allocation", Now: msRFC3339(s.Now), Free: s.Free, Total: s.Total, LaunchedTotal: s.LaunchedTotal,
		Oldest: s.Oldest, Runs: []allocRunOut{}, Workers: []workerOut{}, Usage: []usageOut{}, Params: limits.LabelsMap(s.Params)}
	for _, r := range s.Runs {
		ro := allocRunOut{ID: r.ID, Group: r.Group, Seq: r.Seq, Priority: r.Priority, Slots: r.Slots, Labels: limits.LabelsMap(r.Labels),
			Require: limits.LabelsMap(r.Require)}
		for _, p := range r.Prefer {
			ro.Prefer = append(ro.Prefer, limits.FormatPreference(p))
		}
		if r.LaunchedAt != 0 {
			ro.LaunchedAt = msRFC3339(r.LaunchedAt)
		}
		out.Runs = append(out.Runs, ro)
	}
	for _, w := range s.Workers {
		out.Workers = append(out.Workers, workerOut{Worker: w.Worker, Slots: w.Slots, Free: w.Free, Labels: limits.LabelsMap(w.Labels),
			Groups: w.Groups})
	}
	for _, u := range s.Usage {
		out.Usage = append(out.Usage, usageOut(u))
	}
	return out
}

// IsAllocation reports whether a snapshot file's JSON is an allocation
// snapshot ("kind": "allocation", or a scenario with "allocation").
func IsAllocation(b []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(b, &probe) != nil {
		return false
	}
	if _, ok := probe["allocation"]; ok {
		return true
	}
	var k string
	_ = json.Unmarshal(probe["kind"], &k)
	return k == "allocation"
}

// ParseAllocationFile reads an allocation snapshot file's bytes: a bare
// snapshot or a scenario (its "allocation" is used).
func ParseAllocationFile(path string, b []byte) (*abi.AllocationSnapshot, error) {
	if err := syntaxCheck(b); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var probe map[string]json.RawMessage
	_ = json.Unmarshal(b, &probe)
	at := ""
	if inner, ok := probe["allocation"]; ok {
		b, at = inner, "allocation"
	}
	s, err := parseAllocation(at, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// parseAllocation decodes an allocation snapshot at path. Defaults: a
// run's seq is its position (1-based), slots 1, group "scenario"; free
// and total sum the workers' when not given; launched_total and oldest
// are the number of runs.
func parseAllocation(path string, raw json.RawMessage) (*abi.AllocationSnapshot, error) {
	out := &abi.AllocationSnapshot{}
	var now, free, total, ltotal, oldest int64 = 0, -1, -1, -1, -1
	var kind string
	err := object(path, raw, map[string]field{
		"kind":           strField(&kind),
		"now":            millisField(&now),
		"free":           intField(&free, 0, math.MaxUint32),
		"total":          intField(&total, 0, math.MaxUint32),
		"launched_total": intField(&ltotal, 0, math.MaxUint32),
		"oldest":         intField(&oldest, 0, math.MaxUint32),
		"params":         labelsField(join(path, "params"), &out.Params, abi.MaxParams),
		"runs": func(raw json.RawMessage) error {
			return list_(join(path, "runs"), raw, func(p string, raw json.RawMessage) error {
				var seq, prio, slots, at int64 = int64(len(out.Runs) + 1), 0, 1, 0
				r := abi.AllocRun{Group: "scenario"}
				if err := object(p, raw, map[string]field{
					"id": strField(&r.ID), "group": strField(&r.Group), "seq": intField(&seq, 1, math.MaxInt64),
					"launched_at": millisField(&at), "priority": intField(&prio, math.MinInt32, math.MaxInt32),
					"slots":   intField(&slots, 1, limits.MaxRunSlots),
					"labels":  labelsField(join(p, "labels"), &r.Labels, abi.MaxLabels),
					"require": labelsField(join(p, "require"), &r.Require, abi.MaxLabels),
					"prefer":  preferField(join(p, "prefer"), &r.Prefer),
				}); err != nil {
					return err
				}
				if r.ID == "" {
					return fmt.Errorf("%s.id: missing", p)
				}
				r.Seq, r.Priority, r.Slots, r.LaunchedAt = uint64(seq), int32(prio), uint32(slots), at
				out.Runs = append(out.Runs, r)
				return nil
			})
		},
		"workers": func(raw json.RawMessage) error {
			return list_(join(path, "workers"), raw, func(p string, raw json.RawMessage) error {
				w, err := parseAllocWorker(p, raw)
				if err != nil {
					return err
				}
				out.Workers = append(out.Workers, w)
				return nil
			})
		},
		"usage": func(raw json.RawMessage) error {
			return list_(join(path, "usage"), raw, func(p string, raw json.RawMessage) error {
				var u abi.SlotUsage
				var slots, runs int64
				if err := object(p, raw, map[string]field{"key": strField(&u.Key), "value": strField(&u.Value),
					"slots": intField(&slots, 0, math.MaxUint32), "runs": intField(&runs, 0, math.MaxUint32)}); err != nil {
					return err
				}
				u.Slots, u.Runs = uint32(slots), uint32(runs)
				out.Usage = append(out.Usage, u)
				return nil
			})
		},
	})
	if err != nil {
		return nil, stripListPath(err)
	}
	if kind != "" && kind != "allocation" {
		return nil, fmt.Errorf("%s: %q is not an allocation snapshot", join(path, "kind"), kind)
	}
	seen := map[string]bool{}
	for _, r := range out.Runs {
		if seen[r.ID] {
			return nil, fmt.Errorf("%s: run %q twice", join(path, "runs"), r.ID)
		}
		seen[r.ID] = true
	}
	var wf, wt int64
	for _, w := range out.Workers {
		wf, wt = wf+int64(w.Free), wt+int64(w.Slots)
	}
	if free < 0 {
		free = wf
	}
	if total < 0 {
		total = wt
	}
	if ltotal < 0 {
		ltotal = int64(len(out.Runs))
	}
	if oldest < 0 {
		oldest = int64(len(out.Runs))
	}
	out.Now, out.Free, out.Total, out.LaunchedTotal, out.Oldest = now, uint32(free), uint32(total), uint32(ltotal), uint32(oldest)
	return out, nil
}

// parseAllocWorker decodes one worker of an allocation snapshot at p:
// slots default to 1, free to slots.
func parseAllocWorker(p string, raw json.RawMessage) (abi.WorkerCapacity, error) {
	var w abi.WorkerCapacity
	var slots, fr int64 = 1, -1
	if err := object(p, raw, map[string]field{"worker": strField(&w.Worker), "slots": intField(&slots, 0, math.MaxUint32),
		"free": intField(&fr, 0, math.MaxUint32), "labels": labelsField(join(p, "labels"), &w.Labels, abi.MaxLabels),
		"groups": func(raw json.RawMessage) error {
			if err := json.Unmarshal(raw, &w.Groups); err != nil {
				return fmt.Errorf("%s: want a list of group names or patterns", join(p, "groups"))
			}
			if err := limits.ValidateGroups(w.Groups); err != nil {
				return fmt.Errorf("%s: %v", join(p, "groups"), err)
			}
			return nil
		}}); err != nil {
		return w, err
	}
	if w.Worker == "" {
		return w, fmt.Errorf("%s.worker: missing", p)
	}
	if fr < 0 {
		fr = slots
	}
	if fr > slots {
		return w, fmt.Errorf("%s.free: %d of %d slots", p, fr, slots)
	}
	w.Slots, w.Free = uint32(slots), uint32(fr)
	return w, nil
}

// AllocationDryRun is `policy dry-run` of an allocation policy: the
// candidate's order, and with a live namespace its own policy's beside it.
type AllocationDryRun struct {
	host.AllocationOrder
	Current *host.AllocationOrder `json:"current,omitempty"`
	Runs    int                   `json:"runs"`  // in the snapshot
	Free    uint32                `json:"free"`  // free slots
	Fit     []string              `json:"fit"`   // the runs of the order that fit the free slots now (backfill), in order
	Moved   []string              `json:"moved"` // runs whose place differs from the current policy's order
}

// DryRunAllocation has polArg order snap, or with snap nil the live
// namespace's allocation snapshot (beside the namespace's own policy).
func DryRunAllocation(ctx context.Context, sb Sandbox, st *storage.Store, polArg string, snap *abi.AllocationSnapshot) (AllocationDryRun, error) {
	var set storage.AllocationSettings
	live := snap == nil
	if live {
		var err error
		if snap, set, err = host.AllocationSnapshot(ctx, st); err != nil {
			return AllocationDryRun{}, err
		}
	}
	cand, err := Resolve(ctx, st, polArg)
	if err != nil {
		return AllocationDryRun{}, err
	}
	rt, err := NewRuntime(ctx, sb)
	if err != nil {
		return AllocationDryRun{}, err
	}
	defer rt.Close(context.Background())
	in := host.NewInspector(rt)
	defer in.Close(context.Background())
	o, err := in.DecideAllocation(ctx, cand.Module, snap)
	if err = allocationError(err, cand); err != nil {
		return AllocationDryRun{}, err
	}
	out := AllocationDryRun{AllocationOrder: o, Runs: len(snap.Runs), Free: snap.Free, Fit: fits(snap, o.Order), Moved: []string{}}
	if live {
		cur, err := Resolve(ctx, st, set.PolicyName())
		if err != nil {
			return out, fmt.Errorf("the namespace's allocation policy: %w", err)
		}
		co, err := in.DecideAllocation(ctx, cur.Module, snap)
		if err == nil {
			out.Current = &co
			pos := map[string]int{}
			for i, id := range co.Order {
				pos[id] = i
			}
			for i, id := range o.Order {
				if p, ok := pos[id]; !ok || p != i {
					out.Moved = append(out.Moved, id)
				}
			}
		}
	}
	return out, nil
}

func allocationError(err error, pol Policy) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, host.ErrNotAllocation):
		return badinput.Errorf("policy %s is not an allocation policy; an allocation snapshot needs one (fifo, fair, priority-first, or a pushed allocation policy)", pol.Label)
	}
	return LoadError(err)
}

// fits simulates the placement of order on snap's free slots (each run
// all of its slots or none, passing over those that do not fit, as the
// leader does before the slot guard holds one).
func fits(snap *abi.AllocationSnapshot, order []string) []string {
	slots := map[string]uint32{}
	for _, r := range snap.Runs {
		slots[r.ID] = max(r.Slots, 1)
	}
	free := snap.Free
	out := []string{}
	for _, id := range order {
		if k := slots[id]; k <= free {
			free -= k
			out = append(out, id)
		}
	}
	return out
}

// parseAllocationExpect reads an allocation scenario's expected order: a
// list of run ids.
func parseAllocationExpect(raw json.RawMessage) ([]string, error) {
	var out []string
	err := list("expect", raw, func(p string, raw json.RawMessage) error {
		var id string
		if err := strField(&id)(raw); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		out = append(out, id)
		return nil
	})
	return out, err
}

// AllocationText renders a dry-run for people.
func AllocationText(d AllocationDryRun) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "policy %s (%s): %s\n", d.Policy, shortSHA(d.Version), d.Outcome)
	for _, e := range d.Errors {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	fmt.Fprintf(&b, "order of %d launched runs (%d free slots; %d fit now):\n", d.Runs, d.Free, len(d.Fit))
	fit := map[string]bool{}
	for _, id := range d.Fit {
		fit[id] = true
	}
	for i, id := range d.Order {
		mark := ""
		if fit[id] {
			mark = "  (fits now)"
		}
		if i < len(d.Workers) && d.Workers[i] != "" {
			mark = " on " + d.Workers[i] + mark
		}
		fmt.Fprintf(&b, "  %3d. %s%s\n", i+1, id, mark)
	}
	if d.Current != nil {
		fmt.Fprintf(&b, "the namespace's policy %s orders %d runs; %d placed differently by the candidate", d.Current.Policy, len(d.Current.Order), len(d.Moved))
		if len(d.Moved) > 0 {
			ms := d.Moved
			sort.Strings(ms)
			if len(ms) > 10 {
				ms = append(ms[:10:10], "...")
			}
			fmt.Fprintf(&b, ": %s", strings.Join(ms, " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
