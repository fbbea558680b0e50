package sdk

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/abitest"
	"github.com/wasmsched/wasmsched/internal/abicodec"
)

type launchAll struct{}

func (launchAll) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	for i := range s.Waiting {
		d.Launch(s.Waiting[i].ID, "all")
	}
}

// The guest path (Input, Decide) decodes, decides and encodes without
// allocating once warm.
func TestGuestPathZeroAlloc(t *testing.T) {
	defer func() { serialPolicy, reusePolicy = nil, nil }()
	Register(launchAll{})
	if Kind() != abi.KindSerial {
		t.Fatal(Kind())
	}
	s := abitest.Snapshot("p", 1, nil, []abi.Run{abitest.Waiting("a", 1), abitest.Waiting("b", 2)})
	in := abicodec.AppendSerialSnapshot(nil, s)
	copy(input(len(in)), in)
	out, err := decide(len(in))
	if err != nil {
		t.Fatal(err)
	}
	var d abi.SerialDecision
	if err := abicodec.DecodeSerialDecision(out, &d); err != nil || len(d.Actions) != 2 || d.Actions[1].Run != "b" {
		t.Fatalf("%+v %v", d, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = decide(len(in)) }); n != 0 {
		t.Fatalf("%v allocs per guest decision", n)
	}
	if _, err := decide(len(in) + 1<<20); err == nil {
		t.Fatal("oversized length accepted")
	}
	copy(input(4), []byte{9, 9, 9, 9})
	if _, err := decide(4); err == nil {
		t.Fatal("garbage accepted")
	}
}

func TestRegisterRejects(t *testing.T) {
	defer func() { serialPolicy, reusePolicy = nil, nil }()
	mustPanic := func(f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		f()
	}
	mustPanic(func() { Register(42) })
	Register(launchAll{})
	mustPanic(func() { Register(launchAll{}) })
}

type scripted func(s *abi.SerialSnapshot, d *abi.SerialDecision)

func (f scripted) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) { f(s, d) }

// Decide encodes in place (run ids referencing the input, reasons in the
// tail) or, when that layout does not fit, the ordinary way; either way the
// decision decodes to what the policy appended.
func TestDecideInPlaceEncoding(t *testing.T) {
	defer func() { serialPolicy, reusePolicy = nil, nil }()
	long := string(make([]byte, 3*tailSize)) // beyond the tail and the unused input capacity
	var waiting []abi.Run
	for i := range 40 {
		waiting = append(waiting, abitest.Waiting(fmt.Sprintf("w%02d", i), uint64(i+2)))
	}
	s := abitest.Snapshot("p", 1, []abi.Run{abitest.Running("r", 1)}, waiting)
	cases := map[string]scripted{
		"ids and constant reasons": func(s *abi.SerialSnapshot, d *abi.SerialDecision) {
			for i := range s.Waiting {
				if i%3 == 0 {
					d.Launch(s.Waiting[i].ID, "one")
				} else {
					d.Discard(s.Waiting[i].ID, "two")
				}
			}
			d.Stop(s.Active[0].ID, "")
		},
		"foreign run id": func(s *abi.SerialSnapshot, d *abi.SerialDecision) {
			d.Launch(s.Waiting[0].ID, "x")
			d.Launch(strings.Clone(s.Waiting[1].ID), "y")
		},
		"id as reason, empty id": func(s *abi.SerialSnapshot, d *abi.SerialDecision) {
			d.Launch(s.Waiting[0].ID, s.Waiting[1].ID)
			d.Launch("", "z")
		},
		"reason beyond the tail": func(s *abi.SerialSnapshot, d *abi.SerialDecision) {
			d.Launch(s.Waiting[0].ID, long)
		},
		"more actions than the reserve": func(s *abi.SerialSnapshot, d *abi.SerialDecision) {
			for range 2000 {
				d.Launch(s.Waiting[0].ID, "many")
			}
		},
		"nothing": func(s *abi.SerialSnapshot, d *abi.SerialDecision) {},
	}
	in := abicodec.AppendSerialSnapshot(nil, s)
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			serialPolicy = f
			copy(input(len(in)), in)
			out, err := decide(len(in))
			if err != nil {
				t.Fatal(err)
			}
			inPlace := len(out) > 0 && (cap(outBuf) == 0 || &out[0] != &outBuf[:1][0])
			if want := name == "ids and constant reasons" || name == "nothing"; inPlace != want {
				t.Errorf("in place = %t, want %t", inPlace, want)
			}
			var got, want abi.SerialDecision
			if err := abicodec.DecodeSerialDecision(out, &got); err != nil {
				t.Fatal(err)
			}
			if err := abicodec.DecodeSerialDecision(abicodec.AppendSerialDecision(nil, &sdec), &want); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Actions) != fmt.Sprint(want.Actions) {
				t.Fatalf("got %v\nwant %v", got.Actions, want.Actions)
			}
		})
	}
}
