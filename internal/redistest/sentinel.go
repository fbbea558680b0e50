package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name StartSentinel monitors.
const SentinelMaster = "mymaster"

// Sentinel is one master, one replica and one sentinel (quorum 1,
// down-after 1s) on loopback ports, killed in t.Cleanup.
type Sentinel struct {
	Master, Replica, Sentinel *Node
}

// StartSentinel starts the master, the replica (waits until its link is
// up) and the sentinel (waits until it knows the replica).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{}
	s.Master = startNode(t, "")
	s.Replica = startNode(t, "", "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port))
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 4000\n"+
		"sentinel parallel-syncs %s 1\n", SentinelMaster, s.Master.Port, SentinelMaster, SentinelMaster, SentinelMaster)
	s.Sentinel = startNode(t, conf, "--sentinel")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := s.Replica.Client(t)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: replica %s never linked to %s: %v", s.Replica.Addr(), s.Master.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sc := s.SentinelClient(t)
	for {
		reps, err := sc.Replicas(ctx, SentinelMaster).Result()
		if err == nil && len(reps) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: sentinel %s does not know the replica: %v", s.Sentinel.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// URL is redis+sentinel://SENTINEL/mymaster.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + s.Sentinel.Addr() + "/" + SentinelMaster
}

// SentinelClient returns a client for the sentinel, closed in t.Cleanup.
func (s *Sentinel) SentinelClient(t testing.TB) *redis.SentinelClient {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterAddr asks the sentinel for the current master's address.
func (s *Sentinel) MasterAddr(ctx context.Context, t testing.TB) string {
	t.Helper()
	a, err := s.SentinelClient(t).GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil || len(a) != 2 {
		t.Fatalf("redistest: sentinel get-master-addr-by-name: %v %v", a, err)
	}
	return a[0] + ":" + a[1]
}

// Failover runs SENTINEL FAILOVER and waits until the sentinel names the
// replica as master and the replica reports role:master. It returns the
// new master's address.
func (s *Sentinel) Failover(t testing.TB, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	old := s.MasterAddr(ctx, t)
	sc := s.SentinelClient(t)
	for {
		err := sc.Failover(ctx, SentinelMaster).Err()
		if err == nil {
			break
		}
		// "INPROG" or "NOGOOD" (replica not yet eligible): retry.
		if ctx.Err() != nil {
			t.Fatalf("redistest: sentinel failover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		cur := s.MasterAddr(ctx, t)
		if cur != old {
			n := s.Replica
			if cur == s.Master.Addr() {
				n = s.Master
			}
			info, err := n.Client(t).Info(ctx, "replication").Result()
			if err == nil && strings.Contains(info, "role:master") {
				return cur
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: failover did not complete in %v (master still %s)", d, cur)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
