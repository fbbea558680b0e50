package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

func waiting(id string, seq uint64, prio int32) abi.Run {
	return abi.Run{ID: id, Seq: seq, State: abi.StateWaiting, Priority: prio, Slots: 1}
}

func TestOldestFirstByPriority(t *testing.T) {
	for _, c := range []struct {
		name string
		snap abi.SerialSnapshot
		want []string
	}{
		{"empty", abi.SerialSnapshot{MaxActive: 1}, nil},
		{"highest-priority-wins", abi.SerialSnapshot{MaxActive: 1,
			Waiting: []abi.Run{waiting("r1", 1, 0), waiting("r2", 2, 5), waiting("r3", 3, 5)}}, []string{"r2"}},
		{"two-places", abi.SerialSnapshot{MaxActive: 2,
			Waiting: []abi.Run{waiting("r1", 1, 0), waiting("r2", 2, 5), waiting("r3", 3, 1)}}, []string{"r2", "r3"}},
		{"full", abi.SerialSnapshot{MaxActive: 1,
			Active:  []abi.Run{{ID: "r0", Seq: 0, State: abi.StateRunning, Slots: 1}},
			Waiting: []abi.Run{waiting("r1", 1, 9)}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := sdk.CallSerial(OldestFirstByPriority{}, &c.snap)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range d.Actions {
				if a.Kind != abi.ActionLaunch {
					t.Fatalf("unexpected %s %s", a.Kind, a.Run)
				}
				got = append(got, a.Run)
			}
			if len(got) != len(c.want) {
				t.Fatalf("launched %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("launched %v, want %v", got, c.want)
				}
			}
		})
	}
}
