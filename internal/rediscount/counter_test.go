package rediscount_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/embedded"
	"github.com/wasmsched/wasmsched/internal/rediscount"
)

func TestCounter_Counts(t *testing.T) {
	srv, err := embedded.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()
	sc, other := redis.NewScript("return 1"), redis.NewScript("return 2")
	n := rediscount.New(func(sha string) string {
		if sha == sc.Hash() {
			return "one"
		}
		return ""
	}).Hook(c)
	// The connection's handshake (HELLO, CLIENT SETINFO) is counted too:
	// open it before counting.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*redis.Script{sc, other} {
		if err := s.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	n.Reset()
	c.Set(ctx, "k", "v", 0)
	c.Get(ctx, "k")
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "k")
		sc.EvalSha(ctx, p, nil)
		other.EvalSha(ctx, p, nil) // not named: counted as EVALSHA
		return nil
	})
	got := n.Counts()
	want := map[string]int64{"SET": 1, "GET": 2, "script one": 1, "EVALSHA": 1}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if n.Total() != 5 {
		t.Errorf("total %d, want 5", n.Total())
	}
	n.Reset()
	if n.Total() != 0 {
		t.Errorf("total after Reset %d", n.Total())
	}
}
