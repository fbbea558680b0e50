package storage_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/embedded"
	"github.com/wasmsched/wasmsched/internal/keyspace"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// One redis-server and one embedded server for the whole package; every
// test gets a fresh namespace.
var (
	realSrv *redistest.Server
	embSrv  *embedded.Server
	nsSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "storage-redis-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	realSrv, err = redistest.StartServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	embSrv, err = embedded.Start("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	realSrv.Kill()
	embSrv.Close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// env is one backend + a fresh namespace.
type env struct {
	backend string
	c       *redis.Client
	s       *storage.Store
	url     string
}

// backends runs fn once per backend: subtests "redis" and "embedded".
func backends(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range []struct{ name, url string }{{"redis", realSrv.URL()}, {"embedded", embSrv.URL()}} {
		t.Run(b.name, func(t *testing.T) {
			fn(t, newEnv(t, b.name, b.url))
		})
	}
}

func newEnv(t testing.TB, backend, url string) *env {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ns := fmt.Sprintf("t%d", nsSeq.Add(1))
	s, err := storage.New(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{backend: backend, c: c, s: s, url: url}
}

// fresh returns a new namespace on the same backend (cases needing isolation).
func (e *env) fresh(t testing.TB) *env { t.Helper(); return newEnv(t, e.backend, e.url) }

var ctx = context.Background()

// lead makes stamp the lock holder and leader; returns its fence.
func (e *env) lead(t testing.TB, stamp string) storage.Fence {
	t.Helper()
	if err := e.c.Set(ctx, keyspace.Of(e.s).Lock(), stamp, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	ep, err := e.s.BecomeLeader(ctx, stamp)
	if err != nil {
		t.Fatal(err)
	}
	return storage.Fence{Epoch: ep, Holder: stamp}
}

// dump renders every key of the namespace (type + content) for
// "nothing written" comparisons.
func (e *env) dump(t testing.TB) string {
	t.Helper()
	keys, err := e.c.Keys(ctx, keyspace.Of(e.s).Prefix()+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ := e.c.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = e.c.Get(ctx, k).Val()
		case "hash":
			m := e.c.HGetAll(ctx, k).Val()
			var kv []string
			for f, x := range m {
				kv = append(kv, f+"="+x)
			}
			sort.Strings(kv)
			v = kv
		case "set":
			m := e.c.SMembers(ctx, k).Val()
			sort.Strings(m)
			v = m
		case "zset":
			v = e.c.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = e.c.LRange(ctx, k, 0, -1).Val()
		}
		fmt.Fprintf(&b, "%s %s %v\n", k, typ, v)
	}
	return b.String()
}

// unchanged runs fn and fails if the namespace changed.
func (e *env) unchanged(t testing.TB, fn func()) {
	t.Helper()
	before := e.dump(t)
	fn()
	if after := e.dump(t); after != before {
		t.Fatalf("namespace changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// ok returns v, failing the test on err: ok(f())(t).
func ok[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// messages receives n messages on ps within 5 s and returns their
// payloads by channel (a channel's last), failing the test on a timeout.
func messages(t testing.TB, ps *redis.PubSub, n int) map[string]string {
	t.Helper()
	got := map[string]string{}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for range n {
		m, err := ps.ReceiveMessage(wait)
		if err != nil {
			t.Fatalf("after %v: %v (want %d messages)", got, err, n)
		}
		got[m.Channel] = m.Payload
	}
	return got
}

// TestScripts_headers: every script's header names its KEYS or ARGV and
// states its bound (storage/README.md "Scripts").
func TestScripts_headers(t *testing.T) {
	for _, name := range storage.ScriptNames() {
		src := storage.ScriptSource(name)
		i := strings.Index(src, "\n-- "+name+":")
		if i < 0 {
			t.Errorf("%s.lua: no header line %q", name, "-- "+name+":")
			continue
		}
		var head []string
		for _, l := range strings.Split(src[i+1:], "\n") {
			if !strings.HasPrefix(l, "--") {
				break
			}
			head = append(head, l)
		}
		h := strings.Join(head, "\n")
		if !strings.Contains(h, "\n-- bound: ") {
			t.Errorf("%s.lua: the header does not state a bound (-- bound: ...)", name)
		}
		if !strings.Contains(h, "KEYS") && !strings.Contains(h, "ARGV") {
			t.Errorf("%s.lua: the header names no KEYS or ARGV", name)
		}
	}
}
