// Package redistest starts a real redis-server for tests: on a free
// 127.0.0.1 port, with persistence off, in its own temp dir, killed in
// t.Cleanup. It fails the test (never skips) when redis-server is missing.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server.
type Server struct {
	mu   sync.Mutex
	port int
	dir  string
	cmd  *exec.Cmd
	bin  string
	aof  bool // appendonly yes, appendfsync everysec (StartAOF)
}

// Binary returns the redis-server path (REDIS_SERVER env overrides).
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr == nil {
			return "/usr/bin/redis-server", nil
		}
		return "", fmt.Errorf("redistest: redis-server not found in PATH: install it (apt-get install redis-server) or set REDIS_SERVER")
	}
	return p, nil
}

// Start starts a redis-server on a free loopback port and stops it in
// t.Cleanup. It calls t.Fatal if redis-server is missing or does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// StartAOF is Start with the append-only file on (appendfsync everysec,
// the recommended setting): Restart then reloads what was written.
func StartAOF(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{dir: t.TempDir(), bin: bin, aof: true}
	for attempt := 0; attempt < 5; attempt++ {
		if s.port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		if err = s.start(); err == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatal(err)
	return nil
}

// StartServer starts a redis-server with its working dir in dir; the caller
// must Kill it. For TestMain, where there is no testing.TB.
func StartServer(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	for attempt := 0; attempt < 5; attempt++ {
		s.port, err = freePort()
		if err != nil {
			return nil, err
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	aof := []string{"--appendonly", "no"}
	if s.aof {
		aof = []string{"--appendonly", "yes", "--appendfsync", "everysec"}
	}
	cmd := exec.Command(s.bin, append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no"}, aof...)...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.cmd = cmd
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redistest: redis-server on port %d exited: %s", s.port, tail(log))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("redistest: redis-server on port %d did not answer PING: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(b []byte) string {
	if len(b) > 500 {
		b = b[len(b)-500:]
	}
	return string(b)
}

func (s *Server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Addr is host:port.
func (s *Server) Addr() string { return s.addr() }

// URL is redis://host:port/0.
func (s *Server) URL() string { return "redis://" + s.addr() + "/0" }

// Client returns a new client for the server, closed in t.Cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server (SIGKILL) and waits for it. Safe to call twice.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	for i := 0; i < 200; i++ { // wait until the port is closed
		c, err := net.DialTimeout("tcp", s.addr(), 50*time.Millisecond)
		if err != nil {
			break
		}
		_ = c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	s.cmd = nil
}

// Restart kills the server (SIGKILL) and starts a new one on the same port
// and dir: empty, or, for StartAOF, with what the append-only file kept
// (scripts are never kept).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	var err error
	for i := 0; i < 20; i++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal(err)
}

// PubSubConns counts the server's pub/sub connections (CLIENT LIST TYPE
// pubsub), for tests that check a process shares one.
func PubSubConns(tb testing.TB, c redis.UniversalClient) int {
	tb.Helper()
	out, err := c.Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Count(out, "\n")
}
