package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

func TestParseRedisURL(t *testing.T) {
	ok := []struct{ in, mode, addrs string }{
		{"redis://127.0.0.1:6379/0", storage.ModeSingle, "127.0.0.1:6379"},
		{"rediss://u:p@h:6380/2", storage.ModeSingle, "h:6380"},
		{"h:7000", storage.ModeSingle, "h:7000"},
		{"redis://h1:7000,redis://h2:7001", storage.ModeCluster, "h1:7000,h2:7001"},
		{"h1:7000,h2:7001,h3:7002", storage.ModeCluster, "h1:7000,h2:7001,h3:7002"},
		{"redis+cluster://u:p@h1:7000,h2:7001?dial_timeout=2s", storage.ModeCluster, "h1:7000,h2:7001"},
		{"redis+cluster://h1", storage.ModeCluster, "h1:6379"},
		{"redis+sentinel://s1:26379,s2:26379/mymaster", storage.ModeSentinel, "s1:26379,s2:26379"},
		{"redis-sentinel://u:p@s1:26379/mymaster?db=3&sentinel_password=x", storage.ModeSentinel, "s1:26379"},
		{"rediss+sentinel://s1:26379/mymaster/2", storage.ModeSentinel, "s1:26379"},
	}
	for _, c := range ok {
		tg, err := storage.ParseRedisURL(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if tg.Mode != c.mode || strings.Join(tg.Addrs(), ",") != c.addrs {
			t.Errorf("%s: got %s %v, want %s %s", c.in, tg.Mode, tg.Addrs(), c.mode, c.addrs)
		}
	}
	tg, _ := storage.ParseRedisURL("redis-sentinel://u:p@s1:26379/mymaster?db=3&sentinel_password=x")
	if f := tg.Failover; f.MasterName != "mymaster" || f.DB != 3 || f.Username != "u" || f.Password != "p" || f.SentinelPassword != "x" {
		t.Errorf("sentinel options: %+v", f)
	}
	tg, _ = storage.ParseRedisURL("rediss+cluster://u:p@h1:7000")
	if c := tg.Cluster; c.TLSConfig == nil || c.Username != "u" || c.Password != "p" {
		t.Errorf("cluster options: %+v", c)
	}
	bad := []struct{ in, want string }{
		{"", "empty"},
		{"http://h:1", "unknown scheme"},
		{"redis://h:notaport", "port"},
		{"h1:7000,", "seed 2 is empty"},
		{"redis://h1:7000/1,redis://h2:7001", "only db 0"},
		{"redis+sentinel://s1:26379", "no master name"},
		{"redis+sentinel://s1:26379/m?db=x", "db"},
		{"redis+sentinel://s1:26379/m?bogus=1", "unknown query parameter"},
		{"redis+sentinel://s1:26379/m?replica_only=true", "replica reads"},
		{"redis+cluster://h1:7000/3", "only db 0"},
		{"redis+cluster:///", "no host"},
		{"redis+cluster://h1:7000?bogus=1", "bogus"},
	}
	for _, c := range bad {
		_, err := storage.ParseRedisURL(c.in)
		if !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrInvalid mentioning %q", c.in, err, c.want)
		}
	}
}

func TestConnectClusterAndSentinel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := redistest.StartCluster(t, 3)
	for _, url := range []string{cl.URL(), cl.SeedsURL(), "redis://" + cl.Masters[1].Addr() /* detected */} {
		c, err := storage.Connect(ctx, url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if _, ok := c.(*redis.ClusterClient); !ok {
			t.Fatalf("%s: got %T, want a cluster client", url, c)
		}
		st, err := storage.New(c, "ns-"+url[len(url)-4:])
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Load(ctx); err != nil {
			t.Fatalf("%s: load: %v", url, err)
		}
		if _, err := st.BecomeLeader(ctx, "x"); !errors.Is(err, storage.ErrNotHolder) {
			t.Fatalf("%s: become leader without the lock: %v", url, err)
		}
		// A shard that lost its script cache (failover, restart): the
		// next call reloads the script there and succeeds.
		if err := c.(*redis.ClusterClient).ForEachShard(ctx, func(ctx context.Context, sh *redis.Client) error {
			return sh.ScriptFlush(ctx).Err()
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.BecomeLeader(ctx, "x"); !errors.Is(err, storage.ErrNotHolder) {
			t.Fatalf("%s: after SCRIPT FLUSH on every shard: %v", url, err)
		}
		_ = c.Close()
	}
	se := redistest.StartSentinel(t)
	c, err := storage.Connect(ctx, se.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Connect(ctx, "redis+sentinel://"+se.Sentinel.Addr()+"/nosuchmaster"); err == nil {
		t.Fatal("unknown master name: want an error")
	}
}
