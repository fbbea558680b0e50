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

// StartReplicated starts a master and one replica of it (waits until the
// replica's link is up), both killed in t.Cleanup.
func StartReplicated(t testing.TB) (master, replica *Node) {
	t.Helper()
	master = startNode(t, "")
	replica = startNode(t, "", "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mc := master.Client(t)
	for {
		info, err := mc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return master, replica
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: replica %s never came online at %s: %v", replica.Addr(), master.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CutReplication breaks the replica's link while the master goes on
// serving its clients: the master's default user gets a password (the
// connections already open stay authenticated) and its replica
// connections are killed, so the replica cannot reconnect. Writes the
// master acknowledges from here on reach no replica. (A proxy on the
// replica's link does not work under Sentinel: it re-points the replica
// at the master's real address, +fix-slave-config.)
func (s *Sentinel) CutReplication(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.Master.Addr()})
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: cut replication: %v", err)
	}
	if err := conn.ConfigSet(ctx, "requirepass", "cut-"+strconv.Itoa(s.Master.Port)).Err(); err != nil {
		t.Fatalf("redistest: cut replication: %v", err)
	}
	if err := conn.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		t.Fatalf("redistest: cut replication: %v", err)
	}
}

// StartReplicaOf starts a new replica of the node at addr (what an
// operator does after a failover left the new master alone) and waits
// until it is online; killed in t.Cleanup.
func StartReplicaOf(t testing.TB, addr string) *Node {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	n := startNode(t, "", "--replicaof", host, port)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := n.Client(t)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return n
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: new replica of %s never linked: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
