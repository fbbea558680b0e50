package policytool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
)

// The JSON form of ABI records, for tools only (Scenario files, dry-run
// snapshots); plugins never see JSON. Field names follow abi/ABI.md.
// Times are unix milliseconds (a number) or an RFC 3339 string.

// parseRun decodes a run at path; hasSeq reports whether it gave a seq.
func parseRun(path string, raw json.RawMessage, defState abi.State) (r abi.Run, hasSeq bool, err error) {
	var seq, prio, slots, sub, started, nb, att, maxa int64 = 0, 0, 1, 0, 0, 0, 0, 0
	var state string
	err = object(path, raw, map[string]field{
		"id":           strField(&r.ID),
		"seq":          func(raw json.RawMessage) error { hasSeq = true; return intField(&seq, 1, math.MaxInt64)(raw) },
		"state":        strField(&state),
		"priority":     intField(&prio, math.MinInt32, math.MaxInt32),
		"slots":        intField(&slots, 0, math.MaxUint32),
		"submitted_at": millisField(&sub),
		"started_at":   millisField(&started),
		// ABI v4
		"labels":       labelsField(join(path, "labels"), &r.Labels, abi.MaxLabels),
		"not_before":   millisField(&nb),
		"attempt":      intField(&att, 0, math.MaxUint32),
		"max_attempts": intField(&maxa, 0, math.MaxUint32),
	})
	if err != nil {
		return r, false, err
	}
	r.Seq, r.Priority, r.Slots, r.SubmittedAt, r.StartedAt = uint64(seq), int32(prio), uint32(slots), sub, started
	r.NotBefore, r.Attempt, r.MaxAttempts = nb, uint32(att), uint32(maxa)
	if r.ID == "" {
		return r, false, fmt.Errorf("%s.id: missing", path)
	}
	r.State = defState
	if state != "" {
		st, err := abi.ParseState(strings.ToUpper(state))
		if err != nil || !st.Valid() {
			return r, false, fmt.Errorf("%s.state: %q is not WAITING, LAUNCHED, RUNNING or STOPPING", path, state)
		}
		r.State = st
	}
	return r, hasSeq, nil
}

// SnapshotOut is the JSON form of a serial snapshot as written (what
// parseSnapshot reads back): times in RFC 3339, unset ones omitted.
type SnapshotOut struct {
	Group         string   `json:"group"`
	Policy        string   `json:"policy"`
	MaxActive     uint32   `json:"max_active"`
	Now           string   `json:"now"`
	Active        []runOut `json:"active"`
	Waiting       []runOut `json:"waiting"`
	WaitingTotal  uint32   `json:"waiting_total,omitempty"`  // only when the window is truncated
	WaitingOldest uint32   `json:"waiting_oldest,omitempty"` // only when the window is truncated
	// ABI v4
	Params   map[string]string `json:"params,omitempty"`
	Launches []launchOut       `json:"launches,omitempty"`
}

type runOut struct {
	ID          string            `json:"id"`
	Seq         uint64            `json:"seq"`
	State       string            `json:"state"`
	Priority    int32             `json:"priority"`
	Slots       uint32            `json:"slots"`
	SubmittedAt string            `json:"submitted_at,omitempty"`
	StartedAt   string            `json:"started_at,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	NotBefore   string            `json:"not_before,omitempty"`
	Attempt     uint32            `json:"attempt,omitempty"`
	MaxAttempts uint32            `json:"max_attempts,omitempty"`
}

type launchOut struct {
	At     string            `json:"at"`
	Labels map[string]string `json:"labels,omitempty"`
}

// labelsField reads a JSON object of string values into sorted labels
// (at most max, each bounded as the host bounds them).
func labelsField(path string, dst *[]abi.Label, max int) field {
	return func(raw json.RawMessage) error {
		var m map[string]json.RawMessage
		if kindOf(raw) != "an object" || json.Unmarshal(raw, &m) != nil {
			return fmt.Errorf("want an object of string values, got %s", kindOf(raw))
		}
		if len(m) > max {
			return fmt.Errorf("%d entries, at most %d", len(m), max)
		}
		out := make([]abi.Label, 0, len(m))
		for k, v := range m {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("%s.%s: want a string, got %s", path, k, kindOf(v))
			}
			if err := limits.ValidLabel(k, s); err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
			out = append(out, abi.Label{Key: k, Value: s})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
		*dst = out
		return nil
	}
}

// preferField reads a list of "key=value[:weight]" preferences.
func preferField(path string, dst *[]abi.Preference) field {
	return func(raw json.RawMessage) error {
		var ss []string
		if kindOf(raw) != "a list" || json.Unmarshal(raw, &ss) != nil {
			return fmt.Errorf("want a list of \"key=value[:weight]\" strings, got %s", kindOf(raw))
		}
		ps := make([]abi.Preference, 0, len(ss))
		for _, s := range ss {
			p, err := limits.ParsePreference(s)
			if err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
			ps = append(ps, p)
		}
		ps, err := limits.NormalizePreferences(ps)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		*dst = ps
		return nil
	}
}

// jsonTimeLayout is RFC 3339 in UTC with milliseconds (Redis TIME is ms).
const jsonTimeLayout = "2006-01-02T15:04:05.000Z07:00"

func msRFC3339(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(jsonTimeLayout)
}

// SnapshotJSON renders s in the JSON form.
func SnapshotJSON(s *abi.SerialSnapshot) SnapshotOut {
	out := SnapshotOut{Group: s.Group, Policy: s.Policy, MaxActive: s.MaxActive, Now: msRFC3339(s.Now),
		Active: []runOut{}, Waiting: []runOut{}}
	conv := func(rs []abi.Run) []runOut {
		o := make([]runOut, 0, len(rs))
		for _, r := range rs {
			o = append(o, runOut{ID: r.ID, Seq: r.Seq, State: r.State.String(), Priority: r.Priority, Slots: r.Slots,
				SubmittedAt: msRFC3339(r.SubmittedAt), StartedAt: msRFC3339(r.StartedAt),
				Labels: limits.LabelsMap(r.Labels), NotBefore: msRFC3339(r.NotBefore), Attempt: r.Attempt, MaxAttempts: r.MaxAttempts})
		}
		return o
	}
	out.Active, out.Waiting = conv(s.Active), conv(s.Waiting)
	if s.Truncated() {
		out.WaitingTotal, out.WaitingOldest = s.WaitingTotal, s.WaitingOldest
	}
	out.Params = limits.LabelsMap(s.Params)
	for _, l := range s.Launches {
		out.Launches = append(out.Launches, launchOut{At: msRFC3339(l.At), Labels: limits.LabelsMap(l.Labels)})
	}
	return out
}

// parseSnapshot decodes a serial snapshot at path. Omitted fields: state
// WAITING in waiting, RUNNING in active; slots 1; when no run has a seq,
// seqs are numbered 1.. in order (active first, then waiting). A snapshot
// the host would refuse (lists not sorted by seq, duplicate ids, a state in
// the wrong list) is malformed input, named here.
func parseSnapshot(path string, raw json.RawMessage) (*abi.SerialSnapshot, error) {
	out := &abi.SerialSnapshot{}
	var maxActive, now, total, oldest int64
	var active, waiting []abi.Run
	anySeq := false
	runs := func(dst *[]abi.Run, list string, def abi.State) field {
		return func(raw json.RawMessage) error {
			return list_(join(path, list), raw, func(p string, raw json.RawMessage) error {
				r, has, err := parseRun(p, raw, def)
				anySeq = anySeq || has
				*dst = append(*dst, r)
				return err
			})
		}
	}
	err := object(path, raw, map[string]field{
		"group":      strField(&out.Group),
		"policy":     strField(&out.Policy),
		"max_active": intField(&maxActive, 0, math.MaxUint32),
		"now":        millisField(&now),
		"active":     runs(&active, "active", abi.StateRunning),
		"waiting":    runs(&waiting, "waiting", abi.StateWaiting),
		// a truncated window (ABI v2): how many runs wait in all, and how
		// many of "waiting" are the oldest (the rest are the newest)
		"waiting_total":  intField(&total, 0, math.MaxUint32),
		"waiting_oldest": intField(&oldest, 0, math.MaxUint32),
		// ABI v4: the group's policy parameters and recent launches
		"params": labelsField(join(path, "params"), &out.Params, abi.MaxParams),
		"launches": func(raw json.RawMessage) error {
			return list_(join(path, "launches"), raw, func(p string, raw json.RawMessage) error {
				var l abi.Launch
				if err := object(p, raw, map[string]field{"at": millisField(&l.At),
					"labels": labelsField(join(p, "labels"), &l.Labels, abi.MaxLabels)}); err != nil {
					return err
				}
				if len(out.Launches) == abi.MaxLaunches {
					return fmt.Errorf("%s: more than %d launches", p, abi.MaxLaunches)
				}
				out.Launches = append(out.Launches, l)
				return nil
			})
		},
	})
	if err != nil {
		return nil, stripListPath(err)
	}
	out.MaxActive, out.Now, out.Active, out.Waiting = uint32(maxActive), now, active, waiting
	switch {
	case total == 0 && oldest == 0:
	case total < int64(len(waiting)):
		return nil, fmt.Errorf("%s: %d, fewer than the %d runs of waiting", join(path, "waiting_total"), total, len(waiting))
	case oldest > int64(len(waiting)):
		return nil, fmt.Errorf("%s: %d, more than the %d runs of waiting", join(path, "waiting_oldest"), oldest, len(waiting))
	case total > int64(len(waiting)) && oldest == 0:
		return nil, fmt.Errorf("%s: missing: with waiting_total above the runs of waiting, say how many of them are the oldest", join(path, "waiting_oldest"))
	}
	out.WaitingTotal, out.WaitingOldest = uint32(total), uint32(oldest)
	if out.Group == "" {
		out.Group = "scenario"
	}
	if !anySeq {
		for i := range out.Active {
			out.Active[i].Seq = uint64(i + 1)
		}
		for i := range out.Waiting {
			out.Waiting[i].Seq = uint64(len(out.Active) + i + 1)
		}
	}
	if err := policies.ValidateSerial(out, &abi.SerialDecision{}); err != nil {
		var ve *policies.ValidationError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%s: the host would refuse this snapshot: %s", orRoot(path), strings.Join(ve.Problems, "; "))
		}
		return nil, err
	}
	return out, nil
}

// list_ is list with the error left unprefixed (object adds the field's
// path; the element's path is in the error already).
func list_(path string, raw json.RawMessage, each func(string, json.RawMessage) error) error {
	if err := list(path, raw, each); err != nil {
		return &pathError{err}
	}
	return nil
}

// pathError is an error that already names its full path: object must not
// prefix it again.
type pathError struct{ err error }

func (e *pathError) Error() string { return e.err.Error() }

// stripListPath undoes object's prefix of an error that names its path.
func stripListPath(err error) error {
	var pe *pathError
	if errors.As(err, &pe) {
		return pe.err
	}
	return err
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orRoot(path string) string {
	if path == "" {
		return "snapshot"
	}
	return path
}

// parseRequest decodes a slot-reuse request at path.
func parseRequest(path string, raw json.RawMessage) (*abi.ReuseRequest, error) {
	out := &abi.ReuseRequest{}
	var now int64
	var runRaw json.RawMessage
	err := object(path, raw, map[string]field{
		"group": strField(&out.Group),
		"now":   millisField(&now),
		"run":   func(raw json.RawMessage) error { runRaw = raw; return nil },
		"slots": func(raw json.RawMessage) error {
			return list_(join(path, "slots"), raw, func(p string, raw json.RawMessage) error {
				ts := abi.TaskSlot{Task: uint32(len(out.Slots))}
				var task, index int64 = int64(ts.Task), 0
				if err := object(p, raw, map[string]field{
					"task":   intField(&task, 0, math.MaxUint32),
					"worker": strField(&ts.Worker),
					"index":  intField(&index, 0, math.MaxUint32),
					"token":  strField(&ts.Token),
					"alive":  boolField(&ts.Alive),
					"held":   boolField(&ts.Held),
				}); err != nil {
					return err
				}
				ts.Task, ts.Index = uint32(task), uint32(index)
				if ts.Worker == "" {
					return fmt.Errorf("%s.worker: missing", p)
				}
				out.Slots = append(out.Slots, ts)
				return nil
			})
		},
	})
	if err != nil {
		return nil, stripListPath(err)
	}
	out.Now = now
	if out.Group == "" {
		out.Group = "scenario"
	}
	if runRaw == nil {
		return nil, fmt.Errorf("%s: missing", join(path, "run"))
	}
	run, _, err := parseRun(join(path, "run"), runRaw, abi.StateRunning)
	if err != nil {
		return nil, err
	}
	out.Run = run
	if !bytes.Contains(runRaw, []byte(`"slots"`)) {
		out.Run.Slots = uint32(len(out.Slots))
	}
	return out, nil
}

// --- scenario files ---

// expectAction is one expected serial action.
type expectAction struct {
	Action string `json:"action"`
	Run    string `json:"run"`
	Seq    int64  `json:"seq"` // of a discard_below
	At     int64  `json:"at"`  // of a wake
}

// belowKey is the key of a discard_below in scenario expectations and
// decision diffs (which are keyed by run).
func belowKey(seq uint64) string {
	return client.Action{Action: abi.ActionDiscardBelow.String(), Seq: seq}.Key()
}

// expectReuse is the expected slot-reuse decision.
type expectReuse struct {
	Fail     bool     `json:"fail"`
	Verdicts []string `json:"verdicts"`
}

// Scenario is a parsed scenario: exactly one of Snap / Req is set.
type Scenario struct {
	File, Name string
	Snap       *abi.SerialSnapshot
	Want       map[string]abi.ActionKind // run -> action
	WantBelow  uint64                    // an expected discard_below (0: none)
	WantWake   int64                     // an expected wake, unix ms (0: none)
	Req        *abi.ReuseRequest
	WantReuse  expectReuse
	Alloc      *abi.AllocationSnapshot // an allocation scenario
	WantOrder  []string                // its expected order, run ids
}

// ParseScenarios parses one Scenario file (an object or a list); every
// error names the file, the scenario and the field, or the position of
// malformed JSON.
func ParseScenarios(file string, b []byte) ([]Scenario, error) {
	if err := syntaxCheck(b); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	b = bytes.TrimSpace(b)
	raws := []json.RawMessage{b}
	if kindOf(b) == "a list" {
		raws = nil
		_ = json.Unmarshal(b, &raws)
	}
	var out []Scenario
	for i, raw := range raws {
		sc, err := parseScenario(raw)
		if err != nil {
			where := fmt.Sprintf("scenario %d", i)
			if sc.Name != "" {
				where = fmt.Sprintf("scenario %q", sc.Name)
			}
			return nil, fmt.Errorf("%s: %s: %v", file, where, err)
		}
		sc.File = file
		out = append(out, sc)
	}
	return out, nil
}

func parseScenario(raw json.RawMessage) (Scenario, error) {
	var sc Scenario
	var snapRaw, reqRaw, allocRaw, expRaw json.RawMessage
	keep := func(dst *json.RawMessage) field { return func(raw json.RawMessage) error { *dst = raw; return nil } }
	if kindOf(raw) == "an object" {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			_ = json.Unmarshal(m["name"], &sc.Name) // for the error's prefix
		}
	}
	if err := object("", raw, map[string]field{
		"name": strField(&sc.Name), "snapshot": keep(&snapRaw), "request": keep(&reqRaw), "allocation": keep(&allocRaw), "expect": keep(&expRaw),
	}); err != nil {
		return sc, err
	}
	if sc.Name == "" {
		return sc, errors.New("name: missing")
	}
	if n := btoi(snapRaw != nil) + btoi(reqRaw != nil) + btoi(allocRaw != nil); n > 1 {
		return sc, errors.New(`has more than one of "snapshot", "request" and "allocation"; want one`)
	}
	switch {
	case allocRaw != nil:
		a, err := parseAllocation("allocation", allocRaw)
		if err != nil {
			return sc, err
		}
		sc.Alloc = a
		if expRaw == nil {
			return sc, errors.New("expect: missing (the expected order, a list of run ids)")
		}
		sc.WantOrder, err = parseAllocationExpect(expRaw)
		return sc, err
	case snapRaw != nil:
		snap, err := parseSnapshot("snapshot", snapRaw)
		if err != nil {
			return sc, err
		}
		sc.Snap = snap
		if expRaw == nil {
			return sc, errors.New("expect: missing (use [] for no actions)")
		}
		err = sc.parseSerialExpect(expRaw)
		return sc, err
	case reqRaw != nil:
		req, err := parseRequest("request", reqRaw)
		if err != nil {
			return sc, err
		}
		sc.Req = req
		if expRaw == nil {
			return sc, errors.New("expect: missing")
		}
		if err := object("expect", expRaw, map[string]field{
			"fail": boolField(&sc.WantReuse.Fail),
			"verdicts": func(raw json.RawMessage) error {
				return list_("expect.verdicts", raw, func(p string, raw json.RawMessage) error {
					var v string
					if err := strField(&v)(raw); err != nil {
						return fmt.Errorf("%s: %v", p, err)
					}
					if v != "reuse" && v != "reallocate" {
						return fmt.Errorf("%s: %q is not reuse or reallocate", p, v)
					}
					sc.WantReuse.Verdicts = append(sc.WantReuse.Verdicts, v)
					return nil
				})
			},
		}); err != nil {
			return sc, stripListPath(err)
		}
		return sc, nil
	}
	return sc, errors.New(`"snapshot" (serial), "request" (slot-reuse) or "allocation": missing`)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ScenarioFiles expands paths: a directory means every *.json in it (sorted).
func ScenarioFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no *.json scenario files", p)
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	return files, nil
}

// ReadSnapshotFile reads a dry-run snapshot: a bare snapshot object, or a
// scenario object (its "snapshot" is used, the rest ignored).
func ReadSnapshotFile(path string) (*abi.SerialSnapshot, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if err := syntaxCheck(b); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if kindOf(b) != "an object" {
		return nil, fmt.Errorf("%s: want a snapshot object, got %s", path, kindOf(b))
	}
	var probe map[string]json.RawMessage
	_ = json.Unmarshal(b, &probe)
	at := ""
	if inner, ok := probe["snapshot"]; ok {
		b, at = inner, "snapshot"
	}
	snap, err := parseSnapshot(at, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return snap, nil
}

// parseSerialExpect reads a serial scenario's expected actions: a set
// keyed by run, and at most one discard_below.
func (sc *Scenario) parseSerialExpect(expRaw json.RawMessage) error {
	sc.Want = map[string]abi.ActionKind{}
	return list("expect", expRaw, func(p string, raw json.RawMessage) error {
		var e expectAction
		if err := object(p, raw, map[string]field{"action": strField(&e.Action), "run": strField(&e.Run),
			"seq": intField(&e.Seq, 1, math.MaxInt64), "at": millisField(&e.At)}); err != nil {
			return err
		}
		if e.Action == "wake" {
			if e.At == 0 {
				return fmt.Errorf("%s.at: missing (the time the policy asks to be decided again)", p)
			}
			if sc.WantWake != 0 {
				return fmt.Errorf("%s: a second wake", p)
			}
			sc.WantWake = e.At
			return nil
		}
		if e.Action == "discard_below" {
			if e.Seq == 0 {
				return fmt.Errorf("%s.seq: missing (discard_below discards the waiting runs below seq)", p)
			}
			if sc.WantBelow != 0 {
				return fmt.Errorf("%s: a second discard_below", p)
			}
			sc.WantBelow = uint64(e.Seq)
			return nil
		}
		k, err := abi.ParseActionKind(e.Action)
		if err != nil {
			return fmt.Errorf("%s.action: %q is not launch, discard, stop, discard_below or wake", p, e.Action)
		}
		if e.Run == "" {
			return fmt.Errorf("%s.run: missing", p)
		}
		if _, dup := sc.Want[e.Run]; dup {
			return fmt.Errorf("%s.run: run %q expected twice", p, e.Run)
		}
		sc.Want[e.Run] = k
		return nil
	})
}
