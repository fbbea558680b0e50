package sdk

import (
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/abitest"
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
	in := abi.AppendSerialSnapshot(nil, s)
	copy(Input(len(in)), in)
	out, err := Decide(len(in))
	if err != nil {
		t.Fatal(err)
	}
	var d abi.SerialDecision
	if err := abi.DecodeSerialDecision(out, &d); err != nil || len(d.Actions) != 2 || d.Actions[1].Run != "b" {
		t.Fatalf("%+v %v", d, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Decide(len(in)) }); n != 0 {
		t.Fatalf("%v allocs per guest decision", n)
	}
	if _, err := Decide(len(in) + 1<<20); err == nil {
		t.Fatal("oversized length accepted")
	}
	copy(Input(4), []byte{9, 9, 9, 9})
	if _, err := Decide(4); err == nil {
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
