package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wasmsched/wasmsched/storage"
)

// TestCLILost: `lost` lists what workers kept of runs the store lost,
// newest first, as a table and as JSON; an empty list says so.
func TestCLILost(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	if _, err := e.st.Submit(ctx, storage.SubmitRequest{Group: "g", ID: "x"}); err != nil { // the namespace exists
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "--redis", e.url, "-n", e.ns, "lost")
	if code != 0 || !strings.Contains(out, "(no lost runs)") {
		t.Fatalf("empty: exit %d, %q %q", code, out, errs)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := e.st.NoteLost(ctx, storage.LostRun{Run: id, Token: "1796-" + id, Outcome: storage.StateSucceeded, Worker: "w#1"}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = runCLI(t, "--redis", e.url, "-n", e.ns, "lost")
	if code != 0 || !strings.Contains(out, "r2") || strings.Index(out, "r2") > strings.Index(out, "r1") || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "--redis", e.url, "-n", e.ns, "lost", "--limit", "1", "-o", "json")
	var got []storage.LostRun
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 1 || got[0].Run != "r2" || got[0].Token != "1796-r2" {
		t.Fatalf("json: exit %d %v %+v", code, err, got)
	}
}

// TestCLISubmit_notReplicated: with durable=on and no replica a submit is
// not acknowledged: exit 1 and a message that says why and what to do.
func TestCLISubmit_notReplicated(t *testing.T) {
	e := newCLIEnv(t)
	code, _, errs := runCLI(t, "--redis", e.url+"?durable=on&durable_timeout=50ms", "-n", e.ns, "submit", "g")
	if code != exitFailure || !strings.Contains(errs, "no replica acknowledged the write within 50ms") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	code, _, errs = runCLI(t, "--redis", e.url+"?durable=off", "-n", e.ns, "submit", "g")
	if code != 0 {
		t.Fatalf("durable=off: exit %d %q", code, errs)
	}
}
