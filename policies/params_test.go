package policies

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/abi/params"
)

// TestRuntime_Load_params: a module's declaration of its group parameters
// (the optional export wasmsched_params, abi/params) is read once at load;
// a module without it declares none; a bad declaration refuses the module
// (the push gate says why).
func TestRuntime_Load_params(t *testing.T) {
	rt := newRT(t, Config{})
	p := load(t, rt, "params", readFile(t, "testdata/params.wasm"))
	want := []params.Param{params.Int("limit", 1, 1, 64, "launches per period")}
	if got := p.Params(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("params = %+v, want %+v", got, want)
	}
	// (a module without the export: a small one, not a Go built-in, whose
	// compile under -race takes seconds)
	if got := load(t, rt, "farwake", readFile(t, "testdata/farwake.wasm")).Params(); got != nil {
		t.Fatalf("a module without wasmsched_params declares %+v, want nothing", got)
	}
	_, err := rt.Load(context.Background(), "bad", readFile(t, "testdata/params-bad.wasm"))
	if !errors.Is(err, ErrInstantiate) || !strings.Contains(err.Error(), `wasmsched_params: parameter limit: type "float"`) {
		t.Fatalf("load of a bad declaration = %v", err)
	}
	if _, err := Gate(context.Background(), rt, "bad", readFile(t, "testdata/params-bad.wasm"), GateOptions{}); err == nil {
		t.Fatal("the push gate passed a bad declaration")
	}
	rep, err := Gate(context.Background(), rt, "params", readFile(t, "testdata/params.wasm"), GateOptions{})
	if err != nil || len(rep.Params) != 1 || rep.Params[0].Name != "limit" {
		t.Fatalf("gate = %+v, %v", rep, err)
	}
}
