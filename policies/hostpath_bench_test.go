package policies

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

// BenchmarkHostPath times each piece of Policy.DecideSerial on the C
// priority example (plugins/c/priority, decisions in the indexed form) over
// the Decide benchmarks' snapshot (max_active 2, one RUNNING run, n
// WAITING), so that BENCHMARKS.md can say where a decision's time goes:
//
//   - whole: DecideSerialInto reusing one decision (as the coordinator
//     does), everything below
//   - whole-alloc: DecideSerial (a new decision each call)
//   - pool: taking an instance from the pool and giving it back
//   - deadline: arming and disarming the call deadline around nothing
//   - index: checking the snapshot (states, order, unique ids: the id index)
//   - encode: encoding the snapshot into the guest's input buffer
//   - guest: the wasm call alone (the C policy with the inline deadline checks)
//   - fast: decideFast, the one pass that decodes, checks and copies out an
//     indexed decision (what DecideSerialInto runs for these guests)
//   - decode: decoding the guest's decision in place (the general path)
//   - check: resolving the runs it names and validating it
//   - copy: copying it out of guest memory (the one allocation)
func BenchmarkHostPath(b *testing.B) {
	ctx := context.Background()
	rt := newRT(b, Config{})
	p := load(b, rt, "c-priority", readFile(b, "../plugins/c/priority/priority.wasm"))
	for _, n := range []int{16, 256} {
		w := make([]abi.Run, n)
		for i := range w {
			w[i] = abitest.Waiting(fmt.Sprintf("run-%06d", i+2), uint64(i+2))
		}
		s := abitest.Snapshot("priority", 2, []abi.Run{abitest.Running("run-000001", 1)}, w)
		inst, err := p.acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		v := &inst.v
		size, put := abicodec.SerialSnapshotSize(s), abicodec.PutSerialSnapshot
		if p.ABIVersion() >= 4 {
			size, put = abicodec.SerialSnapshot4Size(s), abicodec.PutSerialSnapshot4
		}
		in, err := inst.inputBuf(ctx, size)
		if err != nil {
			b.Fatal(err)
		}
		put(in, s)
		out, err := inst.decideIn(ctx, size)
		if err != nil {
			b.Fatal(err)
		}
		out = append([]byte(nil), out...) // decode and check read a copy: the guest runs again below
		var view abi.SerialDecision
		decode := func() bool {
			view.Actions = v.actions[:0]
			indexed, err := abicodec.DecodeSerialDecisionRefs(out, &view, &v.refs)
			if err != nil {
				b.Fatal(err)
			}
			v.actions = view.Actions
			return indexed
		}
		check := func() {
			v.resolveRefs(s, v.refs)
			if probs := v.checkSerial(s, &view); !probs.empty() {
				b.Fatal(probs.err(false))
			}
		}
		if !decode() {
			b.Fatal("the C SDK's decision is not in the indexed form")
		}
		v.indexed = true
		v.indexSerial(s)
		check()
		if len(view.Actions) != n+1 {
			b.Fatalf("%d actions, want %d", len(view.Actions), n+1)
		}
		p.release(inst, true)
		name := func(piece string) string { return fmt.Sprintf("%s/waiting=%d", piece, n) }

		b.Run(name("whole"), func(b *testing.B) {
			b.ReportAllocs()
			var d abi.SerialDecision
			for b.Loop() {
				if err := p.DecideSerialInto(ctx, s, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name("whole-alloc"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.DecideSerial(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name("pool"), func(b *testing.B) {
			for b.Loop() {
				i, err := p.acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				p.release(i, true)
			}
		})
		b.Run(name("deadline"), func(b *testing.B) {
			for b.Loop() {
				if _, err := inst.call(ctx, rt.cfg.CallTimeout, func(context.Context) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name("index"), func(b *testing.B) {
			for b.Loop() {
				v.indexSerial(s)
			}
		})
		b.Run(name("encode"), func(b *testing.B) {
			for b.Loop() {
				put(in[:size], s)
			}
		})
		b.Run(name("guest"), func(b *testing.B) {
			in, _ := inst.inputBuf(ctx, size)
			put(in, s)
			for b.Loop() {
				if _, err := inst.decideIn(ctx, size); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name("fast"), func(b *testing.B) {
			var d abi.SerialDecision
			for b.Loop() {
				inst.nseen = 0
				if !inst.decideFast(out, s, p.abi, &d) {
					b.Fatal("decideFast refused the C SDK's decision")
				}
			}
		})
		b.Run(name("decode"), func(b *testing.B) {
			for b.Loop() {
				decode()
			}
		})
		b.Run(name("check"), func(b *testing.B) {
			for b.Loop() {
				check()
			}
		})
		b.Run(name("copy"), func(b *testing.B) {
			b.ReportAllocs()
			var d abi.SerialDecision
			for b.Loop() {
				inst.nseen = 0 // as every call starts
				inst.copyOut(s, &view, true, &d)
			}
		})
	}
}

// BenchmarkDecideV4 is what ABI v4 costs a decision: the same C wait policy
// built against v3 (testdata/c-wait-v3.wasm, the plugins/c/wait of the v3
// SDK) and v4 (plugins/c/wait), on snapshots of 16 and 256 waiting runs,
// each run with two labels, the group with four parameters and a full
// launch history (64 launches with a label each). The v3 plugin is handed
// the v3 record (no labels, history or parameters), the v4 one all of it:
// the difference is the v4 fields' encoding and the guest's reading past
// them. "plain" is the same snapshot without labels, parameters or history
// (what a group of the built-ins sees).
func BenchmarkDecideV4(b *testing.B) {
	ctx := context.Background()
	rt := newRT(b, Config{})
	v3 := load(b, rt, "c-wait-v3", readFile(b, "testdata/c-wait-v3.wasm"))
	v4 := load(b, rt, "c-wait", readFile(b, "../plugins/c/wait/wait.wasm"))
	if v3.ABIVersion() != 3 || v4.ABIVersion() != 4 {
		b.Fatalf("versions %d, %d", v3.ABIVersion(), v4.ABIVersion())
	}
	for _, n := range []int{16, 256} {
		w := make([]abi.Run, n)
		for i := range w {
			w[i] = abitest.Waiting(fmt.Sprintf("run-%06d", i+2), uint64(i+2))
			w[i].Labels = []abi.Label{{Key: "ref", Value: "main"}, {Key: "tenant", Value: fmt.Sprintf("t%d", i%7)}}
			w[i].Attempt, w[i].MaxAttempts = 1, 1
		}
		s := abitest.Snapshot("wait", 2, []abi.Run{abitest.Running("run-000001", 1)}, w)
		s.Params = []abi.Label{{Key: "a", Value: "1"}, {Key: "b", Value: "2s"}, {Key: "c", Value: "x"}, {Key: "d", Value: "y"}}
		for i := range abi.MaxLaunches {
			s.Launches = append(s.Launches, abi.Launch{At: int64(1_700_000_000_000 + i), Labels: []abi.Label{{Key: "tenant", Value: "t1"}}})
		}
		var d abi.SerialDecision
		plain := *s // the same runs without labels, parameters or history
		plain.Params, plain.Launches = nil, nil
		plain.Waiting = append([]abi.Run(nil), s.Waiting...)
		for i := range plain.Waiting {
			plain.Waiting[i].Labels = nil
		}
		for _, p := range []*Policy{v3, v4} {
			for _, c := range []struct {
				name string
				s    *abi.SerialSnapshot
			}{{"keys", s}, {"plain", &plain}} {
				b.Run(fmt.Sprintf("v%d/%s/waiting=%d", p.ABIVersion(), c.name, n), func(b *testing.B) {
					for b.Loop() {
						if err := p.DecideSerialInto(ctx, c.s, &d); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
