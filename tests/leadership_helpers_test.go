package tests

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// Leader runs `wasmsched leader -o json` against r and namespace ns.
func Leader(t testing.TB, r *redistest.Server, ns string) client.Leader {
	t.Helper()
	out, code := RunCLI(t, "--redis", r.URL(), "-n", ns, "leader", "-o", "json")
	if code != 0 {
		t.Fatalf("wasmsched leader: exit %d: %s", code, out)
	}
	var v client.Leader
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("wasmsched leader -o json: %v: %q", err, out)
	}
	return v
}

// Serve starts `wasmsched serve` for namespace ns with the given advertise
// address and lease TTL (admin server off) plus extra flags.
func Serve(t testing.TB, name string, r *redistest.Server, ns, advertise string, ttl time.Duration, extra ...string) *Proc {
	t.Helper()
	args := append([]string{"--redis", r.URL(), "-n", ns, "serve",
		"--advertise", advertise, "--lease-ttl", ttl.String(), "--admin-addr", ""}, extra...)
	return StartProc(t, name, args...)
}

// Identity waits for the "host started" line and returns the identity stamp.
func (p *Proc) Identity(t testing.TB) string {
	t.Helper()
	id := LogAttr(p.WaitLog(t, 10*time.Second, "host started"), "identity")
	if id == "" {
		t.Fatalf("%s: no identity in its start log", p.Name)
	}
	return id
}

// Store opens a storage.Store on r for assertions.
func Store(t testing.TB, r *redistest.Server, ns string) *storage.Store {
	t.Helper()
	st, err := storage.New(r.Client(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// testCtx is a context bounded by d, cancelled in t.Cleanup.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
