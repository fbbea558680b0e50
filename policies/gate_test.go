package policies

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/plugins"
)

func TestGate(t *testing.T) {
	skipUnderRace(t)
	rt := newRT(t, Config{})
	ctx := context.Background()
	for _, name := range plugins.Names() {
		wasm, _ := plugins.Builtin(name)
		bp, _ := plugins.Lookup(name)
		want := bp.Kind
		rep, err := Gate(ctx, rt, name, wasm, GateOptions{Kind: want})
		if err != nil {
			t.Fatalf("built-in %s: %v", name, err)
		}
		n := len(conformanceSerial())
		switch want {
		case abi.KindSlotReuse:
			n = len(conformanceReuse())
		case abi.KindAllocation:
			n = len(conformanceAllocation())
		}
		if rep.Kind != want || rep.Cases != n || len(rep.SHA256) != 64 || rep.Size != len(wasm) {
			t.Fatalf("built-in %s: report %+v", name, rep)
		}
	}
	reuse, _ := plugins.Builtin("reuse")
	wait, _ := plugins.Builtin("wait")
	for _, c := range []struct {
		name  string
		wasm  []byte
		kind  abi.Kind
		want  []error
		words string
	}{
		{"junk", []byte("definitely not wasm"), 0, []error{ErrNotWasm}, "wasm magic"},
		{"truncated", wait[:len(wait)/2], 0, []error{ErrNotWasm}, "malformed module"},
		{"reuse-as-serial", reuse, abi.KindSerial, []error{ErrKind}, "must be serial, the plugin is slot-reuse"},
		{"wait-as-allocation", wait, abi.KindAllocation, []error{ErrKind}, "must be allocation, the plugin is serial"},
		{"badversion", readFile(t, "testdata/badversion.wasm"), 0, []error{ErrABIVersion}, "ABI version"},
		{"missing", readFile(t, "testdata/missing.wasm"), 0, []error{ErrMissingExport}, "missing exports"},
		{"loop", readFile(t, "testdata/loop.wasm"), 0, []error{ErrConformance, ErrTimeout}, `case "empty"`},
	} {
		_, err := Gate(ctx, rt, c.name, c.wasm, GateOptions{Kind: c.kind, Deadline: time.Second})
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: error %v, want %v", c.name, err, w)
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: error %v does not mention %q", c.name, err, c.words)
		}
	}
	// Every conformance snapshot is itself valid.
	for _, c := range conformanceSerial() {
		var v validator
		if probs := v.indexSerial(c.Snapshot); !probs.empty() {
			t.Errorf("conformance case %s: %v", c.Name, probs.list)
		}
	}
}

// skipUnderRace skips a compile- or CPU-heavy sandbox test under -race
// (race_test.go says why); it runs in the pass without the detector.
func skipUnderRace(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("compile/CPU-heavy sandbox test: runs without -race (policies/race_test.go)")
	}
}
