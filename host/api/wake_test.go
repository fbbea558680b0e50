package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/host/api"
	"github.com/wasmsched/wasmsched/storage"
)

// TestAPI_farWake: a policy that asks to be woken past year 9999 (at i64
// max ms: policies/testdata/farwake.wat) is shown with the wake the host
// would keep (24 h after the decision) and its ask beside it, by the run's
// explain and the group's dry-run: 200 with a JSON body, never an empty one.
func TestAPI_farWake(t *testing.T) {
	e := newEnv(t, opts{})
	ctx := context.Background()
	wasm, err := os.ReadFile("../../policies/testdata/farwake.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PushPolicy(ctx, storage.PushRequest{Name: "farwake", Kind: "serial", Blob: wasm, Activate: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	const asked = 9223372036854775807
	ns := "/api/v1/namespaces/ns"
	if got := e.do("PUT", ns+"/groups/g", `{"policy": "farwake"}`, nil); got != 200 {
		t.Fatalf("group set: %d", got)
	}
	var r client.Run
	if got := e.do("POST", ns+"/groups/g/runs", `{"id": "r1"}`, &r); got != 200 && got != 201 {
		t.Fatalf("submit: %d", got)
	}
	before := time.Now()
	var ex client.Explanation
	if got := e.do("GET", ns+"/runs/r1/explain", "", &ex); got != 200 || ex.WakeAt == nil {
		t.Fatalf("explain: %d %+v", got, ex)
	}
	if d := ex.WakeAt.Sub(before); d < 23*time.Hour || d > 25*time.Hour {
		t.Fatalf("explain's wake %v is %v ahead, want the host's bound (24 h)", ex.WakeAt, d)
	}
	var dr client.DryRun
	if got := e.do("POST", ns+"/groups/g/dry-run", `{"policy": "farwake"}`, &dr); got != 200 {
		t.Fatalf("dry-run: %d %+v", got, dr)
	}
	var wake *client.Action
	for i, a := range dr.Active.Actions {
		if a.Action == "wake" {
			wake = &dr.Active.Actions[i]
		}
	}
	if wake == nil || wake.At == nil || wake.AskedMS != asked || wake.At.Sub(before) > 25*time.Hour {
		t.Fatalf("dry-run's wake %+v, want the bounded wake with the ask beside it", wake)
	}
	if b := host.BoundedWake(wake.AskedMS, wake.At.UnixMilli()-abi.MaxWakeAhead); b != wake.At.UnixMilli() {
		t.Fatalf("dry-run's wake %v is not the ask %d bounded", wake.At, wake.AskedMS)
	}
}

// TestWriteJSON_encodingFailure: an answer that cannot be encoded (a time
// past year 9999) is a 500 with the JSON error shape, not the status the
// handler meant with an empty body.
func TestWriteJSON_encodingFailure(t *testing.T) {
	rec := httptest.NewRecorder()
	api.WriteJSON(rec, 200, map[string]any{"at": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	var body struct{ Error, Code string }
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code != "internal" ||
		!strings.Contains(body.Error, "could not be encoded") || !strings.Contains(body.Error, "year outside of range") {
		t.Fatalf("answer %d %q, want a 500 JSON error naming the encoding failure", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	api.WriteJSON(rec, 201, map[string]int{"n": 1})
	if rec.Code != 201 || strings.TrimSpace(rec.Body.String()) != "{\n  \"n\": 1\n}" {
		t.Fatalf("answer %d %q", rec.Code, rec.Body.String())
	}
}

// TestAPI_putGroup_params: a group's parameters are checked against what
// its policy declares (abi/params): a bad value or an undeclared name is a
// 400 naming it, nothing written; an activation that would leave a group
// with parameters the version refuses is a 400 too.
func TestAPI_putGroup_params(t *testing.T) {
	e := newEnv(t, opts{})
	ctx := context.Background()
	wasm, err := os.ReadFile("../../examples/debounce/debounce.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PushPolicy(ctx, storage.PushRequest{Name: "debounce", Kind: "serial", Blob: wasm, Activate: true, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	ns := "/api/v1/namespaces/ns"
	e.fails(400, "invalid", `parameter period: "soon" is not a duration`, "PUT", ns+"/groups/g", `{"policy": "debounce", "params": {"period": "soon"}}`)
	e.fails(400, "invalid", "parameter perod is not one the policy declares", "PUT", ns+"/groups/g", `{"policy": "debounce", "params": {"perod": "1s"}}`)
	if _, err := e.st.GetGroup(ctx, "g"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused PUT made the group: %v", err)
	}
	var g client.Group
	if got := e.do("PUT", ns+"/groups/g", `{"policy": "debounce", "params": {"period": "2s"}}`, &g); got != 200 || g.Params["period"] != "2s" {
		t.Fatalf("a valid PUT: %d %+v", got, g)
	}
	// version 2, the built-in wait's bytes, declares nothing: any parameter
	// goes, until version 1 would be active again
	wait, _ := os.ReadFile("../../plugins/wait/wait.wasm")
	if _, err := e.st.PushPolicy(ctx, storage.PushRequest{Name: "debounce", Kind: "serial", Blob: wait, Who: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := e.do("POST", ns+"/policies/debounce/activate", `{"version": 2}`, nil); got != 200 {
		t.Fatalf("activating a version that declares nothing: %d", got)
	}
	if got := e.do("PUT", ns+"/groups/g", `{"params": {"color": "blue"}}`, nil); got != 200 {
		t.Fatalf("a parameter of a policy that declares nothing: %d", got)
	}
	e.fails(400, "invalid", "activate debounce 1 refused, nothing written: group g (policy debounce): parameter color", "POST", ns+"/policies/debounce/activate", `{"version": 1}`)
}
