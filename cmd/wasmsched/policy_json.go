package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/storage"
)

// The JSON form of ABI records, for tools only (scenario files, dry-run
// snapshots); plugins never see JSON. Field names follow abi/ABI.md.
// Times are unix milliseconds (a number) or an RFC 3339 string.

// jsonMillis is a time in unix ms, decoded from a number or an RFC 3339 string.
type jsonMillis int64

func (m *jsonMillis) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("time %q: want unix ms or RFC 3339", s)
		}
		*m = jsonMillis(t.UnixMilli())
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("time %s: want unix ms or RFC 3339", b)
	}
	*m = jsonMillis(n)
	return nil
}

// runJSONABI is abi.Run in JSON.
type runJSONABI struct {
	ID          string     `json:"id"`
	Seq         uint64     `json:"seq"`
	State       string     `json:"state"`
	Priority    int32      `json:"priority"`
	Slots       *uint32    `json:"slots"`
	SubmittedAt jsonMillis `json:"submitted_at"`
	StartedAt   jsonMillis `json:"started_at"`
}

// snapshotJSON is abi.SerialSnapshot in JSON.
type snapshotJSON struct {
	Group     string       `json:"group"`
	Policy    string       `json:"policy"`
	MaxActive uint32       `json:"max_active"`
	Now       jsonMillis   `json:"now"`
	Active    []runJSONABI `json:"active"`
	Waiting   []runJSONABI `json:"waiting"`
}

// taskSlotJSON is abi.TaskSlot in JSON.
type taskSlotJSON struct {
	Task   *uint32 `json:"task"`
	Worker string  `json:"worker"`
	Index  uint32  `json:"index"`
	Token  string  `json:"token"`
	Alive  bool    `json:"alive"`
	Held   bool    `json:"held"`
}

// reuseRequestJSON is abi.ReuseRequest in JSON.
type reuseRequestJSON struct {
	Group string         `json:"group"`
	Now   jsonMillis     `json:"now"`
	Run   runJSONABI     `json:"run"`
	Slots []taskSlotJSON `json:"slots"`
}

func (r runJSONABI) toABI(where string, defState abi.State) (abi.Run, error) {
	out := abi.Run{ID: r.ID, Seq: r.Seq, Priority: r.Priority, Slots: 1,
		SubmittedAt: int64(r.SubmittedAt), StartedAt: int64(r.StartedAt)}
	if r.Slots != nil {
		out.Slots = *r.Slots
	}
	if r.ID == "" {
		return out, fmt.Errorf("%s.id: missing", where)
	}
	out.State = defState
	if r.State != "" {
		st, err := abi.ParseState(strings.ToUpper(r.State))
		if err != nil {
			return out, fmt.Errorf("%s.state: %q is not WAITING, LAUNCHED, RUNNING or STOPPING", where, r.State)
		}
		out.State = st
	}
	return out, nil
}

// toABI converts the JSON snapshot. Omitted fields: state WAITING in
// waiting, RUNNING in active; slots 1; when no run has a seq, seqs are
// numbered 1.. in order (active first, then waiting).
func (s snapshotJSON) toABI(where string) (*abi.SerialSnapshot, error) {
	out := &abi.SerialSnapshot{Group: s.Group, Policy: s.Policy, MaxActive: s.MaxActive, Now: int64(s.Now)}
	if out.Group == "" {
		out.Group = "scenario"
	}
	noSeq := true
	for _, r := range append(append([]runJSONABI{}, s.Active...), s.Waiting...) {
		if r.Seq != 0 {
			noSeq = false
		}
	}
	var seq uint64
	conv := func(list string, in []runJSONABI, def abi.State) ([]abi.Run, error) {
		var rs []abi.Run
		for i, r := range in {
			ar, err := r.toABI(fmt.Sprintf("%s.%s[%d]", where, list, i), def)
			if err != nil {
				return nil, err
			}
			if noSeq {
				seq++
				ar.Seq = seq
			}
			rs = append(rs, ar)
		}
		return rs, nil
	}
	var err error
	if out.Active, err = conv("active", s.Active, abi.StateRunning); err != nil {
		return nil, err
	}
	if out.Waiting, err = conv("waiting", s.Waiting, abi.StateWaiting); err != nil {
		return nil, err
	}
	return out, nil
}

func (q reuseRequestJSON) toABI(where string) (*abi.ReuseRequest, error) {
	run, err := q.Run.toABI(where+".run", abi.StateRunning)
	if err != nil {
		return nil, err
	}
	out := &abi.ReuseRequest{Group: q.Group, Now: int64(q.Now), Run: run}
	if out.Group == "" {
		out.Group = "scenario"
	}
	for i, t := range q.Slots {
		ts := abi.TaskSlot{Task: uint32(i), Worker: t.Worker, Index: t.Index, Token: t.Token, Alive: t.Alive, Held: t.Held}
		if t.Task != nil {
			ts.Task = *t.Task
		}
		if t.Worker == "" {
			return nil, fmt.Errorf("%s.slots[%d].worker: missing", where, i)
		}
		out.Slots = append(out.Slots, ts)
	}
	if q.Run.Slots == nil {
		out.Run.Slots = uint32(len(out.Slots))
	}
	return out, nil
}

// snapshotFromStore converts a live group snapshot into the ABI record the
// coordinator would send.
func snapshotFromStore(sn storage.Snapshot) (*abi.SerialSnapshot, error) {
	out := &abi.SerialSnapshot{Group: sn.Group.Name, Policy: sn.Group.Policy, MaxActive: uint32(max(sn.Group.MaxActive, 0)), Now: sn.Now.UnixMilli()}
	conv := func(rs []storage.Run) ([]abi.Run, error) {
		var o []abi.Run
		for _, r := range rs {
			st, err := abi.ParseState(string(r.State))
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", r.ID, err)
			}
			ar := abi.Run{ID: r.ID, Seq: uint64(r.Seq), State: st, Priority: int32(r.Priority), Slots: uint32(max(r.Slots, 0))}
			if !r.SubmittedAt.IsZero() {
				ar.SubmittedAt = r.SubmittedAt.UnixMilli()
			}
			if !r.StartedAt.IsZero() {
				ar.StartedAt = r.StartedAt.UnixMilli()
			}
			o = append(o, ar)
		}
		return o, nil
	}
	var err error
	if out.Active, err = conv(sn.Active); err != nil {
		return nil, err
	}
	if out.Waiting, err = conv(sn.Waiting); err != nil {
		return nil, err
	}
	return out, nil
}

// --- scenario files ---

// expectAction is one expected serial action.
type expectAction struct {
	Action string `json:"action"`
	Run    string `json:"run"`
}

// expectReuse is the expected slot-reuse decision.
type expectReuse struct {
	Fail     bool     `json:"fail"`
	Verdicts []string `json:"verdicts"`
}

// scenarioJSON is one scenario as written in a file.
type scenarioJSON struct {
	Name     string            `json:"name"`
	Snapshot *snapshotJSON     `json:"snapshot"`
	Request  *reuseRequestJSON `json:"request"`
	Expect   json.RawMessage   `json:"expect"`
}

// scenario is a parsed scenario: exactly one of Snap / Req is set.
type scenario struct {
	File, Name string
	Snap       *abi.SerialSnapshot
	Want       map[string]abi.ActionKind // run -> action
	Req        *abi.ReuseRequest
	WantReuse  expectReuse
}

// decodeStrict decodes b into v, rejecting unknown fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// parseScenarios parses one scenario file (an object or a list).
func parseScenarios(file string, b []byte) ([]scenario, error) {
	b = bytes.TrimSpace(b)
	var raws []json.RawMessage
	if len(b) > 0 && b[0] == '[' {
		if err := json.Unmarshal(b, &raws); err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
	} else {
		raws = []json.RawMessage{b}
	}
	var out []scenario
	for i, raw := range raws {
		where := fmt.Sprintf("%s: scenario %d", file, i)
		var sj scenarioJSON
		if err := decodeStrict(raw, &sj); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if sj.Name == "" {
			return nil, fmt.Errorf("%s: field \"name\": missing", where)
		}
		where = fmt.Sprintf("%s: scenario %q", file, sj.Name)
		sc := scenario{File: file, Name: sj.Name}
		switch {
		case sj.Snapshot != nil && sj.Request != nil:
			return nil, fmt.Errorf("%s: has both \"snapshot\" and \"request\"; want one", where)
		case sj.Snapshot != nil:
			snap, err := sj.Snapshot.toABI("snapshot")
			if err != nil {
				return nil, fmt.Errorf("%s: field %v", where, err)
			}
			sc.Snap = snap
			var exp []expectAction
			if len(sj.Expect) == 0 {
				return nil, fmt.Errorf("%s: field \"expect\": missing (use [] for no actions)", where)
			}
			if err := decodeStrict(sj.Expect, &exp); err != nil {
				return nil, fmt.Errorf("%s: field \"expect\": want a list of {\"action\",\"run\"}: %v", where, err)
			}
			sc.Want = map[string]abi.ActionKind{}
			for j, e := range exp {
				k, err := abi.ParseActionKind(e.Action)
				if err != nil {
					return nil, fmt.Errorf("%s: field \"expect[%d].action\": %q is not launch, discard or stop", where, j, e.Action)
				}
				if e.Run == "" {
					return nil, fmt.Errorf("%s: field \"expect[%d].run\": missing", where, j)
				}
				if _, dup := sc.Want[e.Run]; dup {
					return nil, fmt.Errorf("%s: field \"expect[%d].run\": run %q expected twice", where, j, e.Run)
				}
				sc.Want[e.Run] = k
			}
		case sj.Request != nil:
			req, err := sj.Request.toABI("request")
			if err != nil {
				return nil, fmt.Errorf("%s: field %v", where, err)
			}
			sc.Req = req
			if len(sj.Expect) == 0 {
				return nil, fmt.Errorf("%s: field \"expect\": missing", where)
			}
			if err := decodeStrict(sj.Expect, &sc.WantReuse); err != nil {
				return nil, fmt.Errorf("%s: field \"expect\": want {\"fail\",\"verdicts\"}: %v", where, err)
			}
			for j, v := range sc.WantReuse.Verdicts {
				if v != "reuse" && v != "reallocate" {
					return nil, fmt.Errorf("%s: field \"expect.verdicts[%d]\": %q is not reuse or reallocate", where, j, v)
				}
			}
		default:
			return nil, fmt.Errorf("%s: field \"snapshot\" (serial) or \"request\" (slot-reuse): missing", where)
		}
		out = append(out, sc)
	}
	return out, nil
}

// scenarioFiles expands paths: a directory means every *.json in it (sorted).
func scenarioFiles(paths []string) ([]string, error) {
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

// readSnapshotFile reads a dry-run snapshot: a bare snapshot object, or a
// scenario object (its "snapshot" is used, "expect" ignored).
func readSnapshotFile(path string) (*abi.SerialSnapshot, error) {
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
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s: want a JSON snapshot object: %v", path, err)
	}
	if inner, ok := probe["snapshot"]; ok {
		b = inner
	}
	var sj snapshotJSON
	if err := decodeStrict(b, &sj); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	snap, err := sj.toABI("snapshot")
	if err != nil {
		return nil, fmt.Errorf("%s: field %v", path, err)
	}
	return snap, nil
}
