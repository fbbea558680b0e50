package policies

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/internal/digest"
)

// GateOptions tunes Gate. The zero value is usable.
type GateOptions struct {
	// Kind is the kind the plugin must have; 0 accepts any kind.
	Kind abi.Kind
	// Deadline bounds the conformance run (0 = DefaultGateDeadline). Each
	// call is also bounded by the runtime's Config.CallTimeout.
	Deadline time.Duration
}

// GateReport describes a plugin that passed Gate.
type GateReport struct {
	Name    string
	Kind    abi.Kind
	SHA256  string
	Size    int
	Cases   int            // conformance cases run
	Elapsed time.Duration  // of the conformance run
	Params  []params.Param // the group parameters it declares (nil: none)
}

// Gate is the push gate shared by the CLI and the hosts: it loads wasm on rt
// (compile, ABI version, exports and their signatures, kind, _initialize),
// checks the kind against opts.Kind, then runs the conformance cases of its
// kind (conformanceSerial / conformanceReuse / conformanceAllocation) within opts.Deadline: every
// call must return, and every decision must be valid against its input
// (ValidateSerial / validateReuse / ValidateAllocation). It loads a private copy and closes it
// before returning. Errors wrap ErrNotWasm, ErrMissingExport, ErrABIVersion,
// ErrInstantiate, ErrKind or ErrConformance (the latter together with the
// call's own error: ErrTrap, ErrTimeout or ErrInvalidDecision) and name
// the case that failed.
func Gate(ctx context.Context, rt *Runtime, name string, wasm []byte, opts GateOptions) (GateReport, error) {
	rep := GateReport{Name: name, SHA256: digest.SHA256(wasm), Size: len(wasm)}
	p, err := rt.Load(ctx, name, wasm)
	if err != nil {
		return rep, err
	}
	defer p.Close(context.Background())
	rep.Kind, rep.Params = p.Kind(), p.Params()
	if opts.Kind != 0 && opts.Kind != p.Kind() {
		return rep, fmt.Errorf("%w: policy %q must be %s, the plugin is %s", ErrKind, name, opts.Kind, p.Kind())
	}
	deadline := opts.Deadline
	if deadline <= 0 {
		deadline = DefaultGateDeadline
	}
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	fail := func(what string, err error) (GateReport, error) {
		rep.Elapsed = time.Since(start)
		if cctx.Err() != nil && ctx.Err() == nil {
			return rep, fmt.Errorf("%w: policy %q: case %q: conformance run exceeded its deadline of %v: %w", ErrConformance, name, what, deadline, err)
		}
		return rep, fmt.Errorf("%w: policy %q: case %q: %w", ErrConformance, name, what, err)
	}
	switch p.Kind() {
	case abi.KindSerial:
		for _, c := range conformanceSerial() {
			// DecideSerial validates the decision against the snapshot
			if _, err := p.DecideSerial(cctx, c.Snapshot); err != nil {
				return fail(c.Name, err)
			}
			rep.Cases++
		}
	case abi.KindAllocation:
		for _, c := range conformanceAllocation() {
			// DecideAllocation validates the order against the snapshot
			if _, err := p.DecideAllocation(cctx, c.Snapshot); err != nil {
				return fail(c.Name, err)
			}
			rep.Cases++
		}
	case abi.KindSlotReuse:
		for _, c := range conformanceReuse() {
			// DecideReuse validates the decision against the request
			if _, err := p.DecideReuse(cctx, c.Request); err != nil {
				return fail(c.Name, err)
			}
			rep.Cases++
		}
	}
	rep.Elapsed = time.Since(start)
	if cctx.Err() != nil && ctx.Err() == nil {
		return rep, fmt.Errorf("%w: policy %q: conformance run exceeded its deadline of %v", ErrConformance, name, deadline)
	}
	return rep, ctx.Err()
}

// serialCase is one canned serial snapshot of the conformance run.
type serialCase struct {
	Name     string
	Snapshot *abi.SerialSnapshot
}

// reuseCase is one canned slot-reuse request of the conformance run.
type reuseCase struct {
	Name    string
	Request *abi.ReuseRequest
}

func confRun(id string, seq uint64, st abi.State, prio int32) abi.Run {
	r := abi.Run{ID: id, Seq: seq, State: st, Priority: prio, Slots: 1, SubmittedAt: 1_700_000_000_000 + int64(seq)*1000}
	if st == abi.StateRunning || st == abi.StateStopping {
		r.StartedAt = r.SubmittedAt + 500
	}
	return r
}

// conformanceSerial returns the canned snapshots every serial plugin must
// answer with a valid decision: empty, only waiting, with active runs,
// STOPPING runs, max_active above one, priorities, a full group, and the
// truncated window of a deep group.
func conformanceSerial() []serialCase {
	const now = 1_700_000_100_000
	W, L, R, S := abi.StateWaiting, abi.StateLaunched, abi.StateRunning, abi.StateStopping
	snap := func(max uint32, active, waiting []abi.Run) *abi.SerialSnapshot {
		return &abi.SerialSnapshot{Group: "conformance", Policy: "candidate", MaxActive: max, Now: now, Active: active, Waiting: waiting}
	}
	type runs = []abi.Run
	// deep: the window of a group 99,998 runs deep (ABI v2)
	deep := func(s *abi.SerialSnapshot) *abi.SerialSnapshot {
		s.WaitingTotal, s.WaitingOldest = 99_998, 2
		return s
	}
	return []serialCase{
		{"empty", snap(1, nil, nil)},
		{"only-waiting", snap(1, nil, runs{confRun("w1", 1, W, 0), confRun("w2", 2, W, 5), confRun("w3", 3, W, 0)})},
		{"one-waiting", snap(1, nil, runs{confRun("w1", 1, W, 0)})},
		{"with-active", snap(1, runs{confRun("a1", 1, R, 0)}, runs{confRun("w2", 2, W, 0), confRun("w3", 3, W, 9)})},
		{"only-active", snap(1, runs{confRun("a1", 1, L, 0)}, nil)},
		{"stopping", snap(1, runs{confRun("a1", 1, S, 0)}, runs{confRun("w2", 2, W, 0)})},
		{"max2-one-active", snap(2, runs{confRun("a1", 1, R, 3)}, runs{confRun("w2", 2, W, 1), confRun("w3", 3, W, 7), confRun("w4", 4, W, 1)})},
		{"max0-reads-as-1", snap(0, nil, runs{confRun("w1", 1, W, 0), confRun("w2", 2, W, 0)})},
		{"max3-full", snap(3, runs{confRun("a1", 1, R, 0), confRun("a2", 2, L, 0), confRun("a3", 3, R, 0)}, runs{confRun("w4", 4, W, 100)})},
		{"negative-priorities", snap(2, nil, runs{confRun("w1", 1, W, -5), confRun("w2", 2, W, -1), confRun("w3", 3, W, -9)})},
		{"deep-window", deep(snap(1, runs{confRun("a1", 1, R, 0)}, runs{confRun("w2", 2, W, 0), confRun("w3", 3, W, 4), confRun("w99999", 99_999, W, 0), confRun("w100000", 100_000, W, 2)}))},
	}
}

// conformanceReuse returns the canned requests every slot-reuse plugin must
// answer with a valid decision.
func conformanceReuse() []reuseCase {
	slot := func(task uint32, worker string, alive, held bool) abi.TaskSlot {
		return abi.TaskSlot{Task: task, Worker: worker, Index: task, Token: "tok-" + worker, Alive: alive, Held: held}
	}
	req := func(slots ...abi.TaskSlot) *abi.ReuseRequest {
		r := confRun("run", 1, abi.StateRunning, 0)
		r.Slots = uint32(len(slots))
		return &abi.ReuseRequest{Group: "conformance", Now: 1_700_000_100_000, Run: r, Slots: slots}
	}
	return []reuseCase{
		{"all-verified", req(slot(0, "w1", true, true), slot(1, "w2", true, true))},
		{"dead-worker", req(slot(0, "w1", true, true), slot(1, "w2", false, true))},
		{"slot-taken", req(slot(0, "w1", true, false))},
		{"nothing-verified", req(slot(0, "w1", false, false), slot(1, "w2", false, false), slot(2, "w3", true, false))},
		{"one-slot", req(slot(0, "w1", true, true))},
	}
}
