// Package recordtest holds the JSON goldens of the client's records (one
// per record type, testdata/*.json) and the namespace state they show
// (Fixture), so the Go client's, the HTTP API's and the CLI's tests check
// the same JSON against the same file. Production code never imports it.
package recordtest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

var update = flag.Bool("update-records", false, "rewrite internal/recordtest/testdata/*.json from this test's output")

// The fixture's names: fixed, so the goldens need no normalising of them.
const (
	Namespace = "records"
	Group     = "g"
	Running   = "r1"      // LAUNCHED by decision Claim, then RUNNING on Worker's two slots
	Waiting   = "r2"      // behind Running
	Schedule  = "nightly" // a cron schedule of Group (0 2 * * * in Europe/Paris)
	Worker    = "w1:7070#1#aa"
	Holder    = "leader:1#1#bb"
	Claim     = "c1"
	Policy    = "mine" // pushed once (the built-in wait's bytes), active
	PolicyBy  = "tester@host"
)

// Fixture writes into st's namespace (Namespace, empty) the state the goldens show:
// group g (wait, max_active 1, retention 36h), run r1 (2 slots, priority 5,
// payload "hello", 10s) launched by decision c1 of the test's own leader
// term and RUNNING on worker w1's two slots, run r2 waiting behind it, a
// leader tick, and policy "mine" pushed and active. It returns the fence.
func Fixture(tb testing.TB, ctx context.Context, st *storage.Store, wasm []byte) storage.Fence {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	ret := 36 * time.Hour
	_, err := st.SetGroupSettings(ctx, Group, storage.GroupSettings{Policy: "wait", MaxActive: 1, Retention: &ret})
	must(err)
	_, err = st.Submit(ctx, storage.SubmitRequest{Group: Group, ID: Running, Slots: 2, Priority: 5, Payload: "hello", Duration: 10 * time.Second})
	must(err)
	_, err = st.Submit(ctx, storage.SubmitRequest{Group: Group, ID: Waiting})
	must(err)
	must(st.RegisterWorker(ctx, Worker, 2, time.Hour))
	_, err = st.Locker().Obtain(ctx, keyspace.Of(st).Lock(), time.Hour, &redislock.Options{Token: Holder})
	must(err)
	epoch, err := st.BecomeLeader(ctx, Holder)
	must(err)
	f := storage.Fence{Epoch: epoch, Holder: Holder}
	must(st.Tick(ctx, f))
	sn, err := st.Snapshot(ctx, Group)
	must(err)
	_, err = storagetest.Apply(ctx, st, f, Group, storage.Decision{Version: sn.Group.Version, ClaimID: Claim, Policy: "wait", PolicyVersion: "0123456789ab",
		PolicySHA256: "0123456789ab" + string(bytes.Repeat([]byte("0"), 52)),
		Actions:      []storage.Action{{Kind: storage.ActionLaunch, Run: Running, Reason: "oldest"}}})
	must(err) // the apply places Running on the worker's free slot
	_, err = st.PushPolicy(ctx, storage.PushRequest{Name: Policy, Kind: "serial", Who: PolicyBy, Note: "first", Blob: wasm, Activate: true})
	must(err)
	_, err = st.SetSchedule(ctx, storage.Schedule{Name: Schedule, Group: Group, Cron: "0 2 * * *", TZ: "Europe/Paris", Payload: "nightly",
		Timeout: 20 * time.Minute, Retry: storage.Retry{MaxAttempts: 3, Base: 30 * time.Second}})
	must(err)
	return f
}

// Check compares got, the JSON of one record (or a list of them), with the
// golden testdata/NAME.json after Normalize; -update-records rewrites it.
func Check(tb testing.TB, name string, got []byte) {
	tb.Helper()
	norm, err := Normalize(got)
	if err != nil {
		tb.Fatalf("record %s: %v in %s", name, err, got)
	}
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "testdata", name+".json")
	if *update {
		if err := os.WriteFile(path, norm, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("record %s: %v (go test -update-records writes it)", name, err)
	}
	if !bytes.Equal(want, norm) {
		tb.Errorf("record %s differs from %s (go test -update-records rewrites it):\n--- want\n%s\n--- got\n%s", name, path, want, norm)
	}
}

var (
	reTime  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	reToken = regexp.MustCompile(`^\d{13}-\d+(\.\d+)?$`)
	reSHA   = regexp.MustCompile(`\b[0-9a-f]{64}\b|\b[0-9a-f]{12}\b`)
)

// Normalize re-encodes a JSON document with sorted keys and two-space
// indents, every RFC 3339 time as "<time>", every assignment token as
// "<token>", every non-zero epoch as "<epoch>" and every sha256 (whole or its 12-digit prefix) as "<sha>":
// what differs from one run of a test to the next, or from one build of
// the built-in plugins to the next.
func Normalize(b []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v = walk(v)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps: keys sorted
		return nil, err
	}
	return out.Bytes(), nil
}

func walk(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := e.(json.Number); ok && k == "epoch" && n != "0" {
				x[k] = "<epoch>" // Redis TIME in ms at the leader's promotion
				continue
			}
			x[k] = walk(e)
		}
	case []any:
		for i, e := range x {
			x[i] = walk(e)
		}
	case string:
		switch {
		case reTime.MatchString(x):
			return "<time>"
		case reToken.MatchString(x):
			return "<token>"
		}
		return reSHA.ReplaceAllString(x, "<sha>")
	}
	return v
}
