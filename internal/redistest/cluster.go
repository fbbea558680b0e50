package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server process (cluster node, replica or sentinel)
// started by this package with extra arguments.
type Node struct {
	mu   sync.Mutex
	Port int
	Dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
}

// Addr is 127.0.0.1:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Client returns a plain client for this one node, closed in t.Cleanup.
func (n *Node) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the node with SIGKILL and waits for it (safe to call twice).
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.done
	n.cmd = nil
}

// Stop suspends the node (SIGSTOP): it holds its connections and answers
// nothing until Cont.
func (n *Node) Stop() { n.signal(syscall.SIGSTOP) }

// Cont resumes a stopped node (SIGCONT).
func (n *Node) Cont() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

// startNode starts redis-server with args (plus port/bind/dir/log/no
// persistence) on a free port, retrying on a port race, and waits for PING.
// Stopped in t.Cleanup. confFile, if not "", is written to dir/redis.conf
// (with "port N" prepended) and passed as the first argument.
func startNode(t testing.TB, confFile string, args ...string) *Node {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		n := &Node{Port: port, Dir: dir}
		var argv []string
		if confFile != "" {
			conf := filepath.Join(dir, "redis.conf")
			body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n%s", port, dir, filepath.Join(dir, "redis.log"), confFile)
			if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			argv = append([]string{conf}, args...)
		} else {
			argv = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--dir", dir,
				"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}, args...)
		}
		cmd := exec.Command(bin, argv...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _, _ = cmd.Process.Wait(); close(exited) }()
		n.cmd, n.done = cmd, exited
		if lastErr = waitPing(n.Addr(), exited, dir); lastErr == nil {
			t.Cleanup(n.Kill)
			return n
		}
		n.Kill()
	}
	t.Fatal(lastErr)
	return nil
}

func waitPing(addr string, exited <-chan struct{}, dir string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return fmt.Errorf("redistest: redis-server at %s exited: %s", addr, tail(log))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server at %s did not answer PING: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster is a Redis Cluster of masters only (no replicas), slots split
// evenly in contiguous ranges, on loopback ports, killed in t.Cleanup.
type Cluster struct {
	Masters []*Node
}

// StartCluster starts a Redis Cluster with n masters (1..16), assigns the
// 16384 slots in n contiguous ranges, joins the nodes (CLUSTER MEET) and
// waits until every node reports cluster_state:ok and knows all masters.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 || n > 16 {
		t.Fatalf("redistest: cluster of %d masters: want 1..16", n)
	}
	cl := &Cluster{}
	for range n {
		cl.Masters = append(cl.Masters, startNode(t, "", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	per := 16384 / n
	for i, m := range cl.Masters {
		c := m.Client(t)
		lo, hi := i*per, (i+1)*per-1
		if i == n-1 {
			hi = 16383
		}
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: cluster addslotsrange on %s: %v", m.Addr(), err)
		}
		if i > 0 {
			if err := c.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", m0Port(cl)).Err(); err != nil {
				t.Fatalf("redistest: cluster meet from %s: %v", m.Addr(), err)
			}
		}
	}
	for _, m := range cl.Masters {
		c := m.Client(t)
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r") &&
				strings.Contains(info, "cluster_size:"+strconv.Itoa(n)+"\r") {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("redistest: cluster node %s not ready: %v %q", m.Addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return cl
}

func m0Port(cl *Cluster) int { return cl.Masters[0].Port }

// Addrs lists the masters' host:port.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, m := range c.Masters {
		out = append(out, m.Addr())
	}
	return out
}

// URL is the explicit cluster form: redis+cluster://a1,a2,a3.
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// SeedsURL is the comma-separated seed form: redis://a1,redis://a2,...
func (c *Cluster) SeedsURL() string {
	var parts []string
	for _, a := range c.Addrs() {
		parts = append(parts, "redis://"+a)
	}
	return strings.Join(parts, ",")
}

// Client returns a cluster client, closed in t.Cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// SlotOwner returns the address of the master that owns slot (CLUSTER
// SLOTS through the first reachable master).
func (c *Cluster) SlotOwner(ctx context.Context, t testing.TB, slot int64) string {
	t.Helper()
	for _, m := range c.Masters {
		cl := redis.NewClient(&redis.Options{Addr: m.Addr()})
		//lint:ignore SA1019 CLUSTER SLOTS is what every Redis 7 answers; the helper needs only the slot ranges
		slots, err := cl.ClusterSlots(ctx).Result()
		_ = cl.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				if a := s.Nodes[0].Addr; !strings.HasPrefix(a, ":") {
					return a
				}
				return "127.0.0.1" + s.Nodes[0].Addr // a lone node reports no IP
			}
		}
	}
	t.Fatalf("redistest: no owner for slot %d", slot)
	return ""
}
