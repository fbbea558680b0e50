// Package tests holds black-box and fault tests across processes: the
// wasmsched binary (built once in TestMain), real redis-servers (one per
// test, internal/redistest), kill -9, SIGSTOP/SIGCONT, SIGTERM.
//
// The harness in this file is shared by every test file of the package:
//
//	bin := Binary(t)                    // path of the built wasmsched
//	r := redistest.Start(t)             // a fresh redis-server on 127.0.0.1
//	p := StartProc(t, "a", "--redis", r.URL(), "serve", ...)
//	p.WaitLog(t, "became leader", 5*time.Second)
//	p.Kill(); p.Signal(syscall.SIGTERM); p.Stop(); p.Cont(); p.Wait(d)
//	out, code := RunCLI(t, "--redis", r.URL(), "leader", "-o", "json")
//	WaitFor(t, d, "what", func() bool { ... })
//
// Every process is killed (SIGKILL) and reaped in t.Cleanup. Build flags for
// the binary can be given in WASMSCHED_TEST_BUILDFLAGS (GOFLAGS is honoured
// by the go command as usual). With WASMSCHED_TEST_LOGDIR=DIR every
// process's stderr is kept in DIR/TEST/NAME.log, passed or failed.
package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binPath, staleTickerPath string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wasmsched-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "wasmsched")
	args := []string{"build", "-o", binPath}
	if f := os.Getenv("WASMSCHED_TEST_BUILDFLAGS"); f != "" {
		args = append(args, strings.Fields(f)...)
	}
	args = append(args, "github.com/wasmsched/wasmsched/cmd/wasmsched")
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: building wasmsched: %v\n", err)
		return 1
	}
	// a test's own binary: a host that writes with a stale fence
	// (testdata/staleticker; the shipped binary has no such hook)
	staleTickerPath = filepath.Join(dir, "staleticker")
	cmd = exec.Command("go", "build", "-o", staleTickerPath, "./testdata/staleticker")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: building testdata/staleticker: %v\n", err)
		return 1
	}
	return m.Run()
}

// Binary is the path of the wasmsched binary built for this test run.
func Binary(t testing.TB) string {
	t.Helper()
	if binPath == "" {
		t.Fatal("tests: binary not built (TestMain did not run)")
	}
	return binPath
}

// logBuf collects a process's output and lets tests wait for lines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
	cond  chan struct{} // closed and replaced on every new line
}

func newLogBuf() *logBuf { return &logBuf{cond: make(chan struct{})} }

func (l *logBuf) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	close(l.cond)
	l.cond = make(chan struct{})
	l.mu.Unlock()
}

func (l *logBuf) snapshot() ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...), l.cond
}

// Proc is a running wasmsched process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	logs *logBuf // stderr (slog) lines
	out  *logBuf // stdout lines
	done chan struct{}
	err  error // exit error, set before done is closed
	t    testing.TB
}

// StartProc starts the binary with args; it is killed and reaped in
// t.Cleanup. Its stderr is logged to t with the name as prefix when the test
// fails (and kept for WaitLog / Logs).
func StartProc(t testing.TB, name string, args ...string) *Proc {
	t.Helper()
	return startBinary(t, Binary(t), name, args...)
}

// startBinary is StartProc of another binary.
func startBinary(t testing.TB, bin, name string, args ...string) *Proc {
	t.Helper()
	return startBinaryEnv(t, bin, name, nil, args...)
}

// startBinaryEnv is startBinary with env added to the clean environment.
func startBinaryEnv(t testing.TB, bin, name string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Name: name, cmd: cmd, logs: newLogBuf(), out: newLogBuf(), done: make(chan struct{}), t: t}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	scan := func(r io.Reader, into *logBuf) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			into.add(sc.Text())
		}
	}
	go scan(stderr, p.logs)
	go scan(stdout, p.out)
	go func() {
		wg.Wait() // read all output before Wait closes the pipes
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			lines, _ := p.logs.snapshot()
			for _, l := range lines {
				t.Logf("[%s] %s", name, l)
			}
		}
		if dir := os.Getenv("WASMSCHED_TEST_LOGDIR"); dir != "" {
			p.saveLogs(t, dir)
		}
	})
	return p
}

// procLogger is a logger for a worker or host the test runs in its own
// process: its lines are shown when the test fails and kept under
// WASMSCHED_TEST_LOGDIR as NAME.log, like a Proc's stderr.
func procLogger(t testing.TB, name string) *slog.Logger {
	lb := newLogBuf()
	t.Cleanup(func() {
		lines, _ := lb.snapshot()
		if t.Failed() {
			for _, l := range lines {
				t.Logf("[%s] %s", name, l)
			}
		}
		if dir := os.Getenv("WASMSCHED_TEST_LOGDIR"); dir != "" {
			writeLogs(t, dir, name, lines)
		}
	})
	return slog.New(slog.NewTextHandler(lineWriter{lb}, nil))
}

// lineWriter adds each Write (one slog record) to a logBuf as a line.
type lineWriter struct{ lb *logBuf }

func (w lineWriter) Write(b []byte) (int, error) {
	w.lb.add(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// writeLogs writes lines to DIR/TEST/NAME.log.
func writeLogs(t testing.TB, dir, name string, lines []string) {
	d := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Logf("saving %s's logs: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(d, name+".log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Logf("saving %s's logs: %v", name, err)
	}
}

// saveLogs writes p's stderr to DIR/TEST/NAME.log (WASMSCHED_TEST_LOGDIR:
// every process's logs of a run, failed or not, for reading a timeline).
func (p *Proc) saveLogs(t testing.TB, dir string) {
	<-p.done
	lines, _ := p.logs.snapshot()
	writeLogs(t, dir, p.Name, lines)
}

// cleanEnv is the environment without WASMSCHED_* variables, so only the
// flags a test passes count.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		// nor the developer's tracing: a test turns it on where it wants it
		if !strings.HasPrefix(kv, "WASMSCHED_") && !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "TRACEPARENT=") {
			env = append(env, kv)
		}
	}
	return env
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (no-op after exit).
func (p *Proc) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits until the process is reaped.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop freezes the process (SIGSTOP); Cont resumes it.
func (p *Proc) Stop() { p.Signal(syscall.SIGSTOP) }

// Cont resumes a stopped process (SIGCONT).
func (p *Proc) Cont() { p.Signal(syscall.SIGCONT) }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to exit and returns its exit code
// (-1 if killed by a signal); it fails the test on timeout.
func (p *Proc) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", p.Name, d)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// Logs returns the stderr lines so far.
func (p *Proc) Logs() []string { l, _ := p.logs.snapshot(); return l }

// LogsMatching returns the stderr lines containing every one of subs.
func (p *Proc) LogsMatching(subs ...string) []string {
	var out []string
	for _, l := range p.Logs() {
		if containsAll(l, subs) {
			out = append(out, l)
		}
	}
	return out
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// WaitLog waits up to d for a stderr line containing every one of subs and
// returns it; it fails the test on timeout.
func (p *Proc) WaitLog(t testing.TB, d time.Duration, subs ...string) string {
	t.Helper()
	line, ok := p.AwaitLog(d, subs...)
	if !ok {
		t.Fatalf("%s: no log line with %q within %v", p.Name, subs, d)
	}
	return line
}

// AwaitLog is WaitLog without failing: ok is false on timeout.
func (p *Proc) AwaitLog(d time.Duration, subs ...string) (string, bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	seen := 0
	for {
		lines, cond := p.logs.snapshot()
		for ; seen < len(lines); seen++ {
			if containsAll(lines[seen], subs) {
				return lines[seen], true
			}
		}
		select {
		case <-cond:
		case <-p.done:
			lines, _ := p.logs.snapshot()
			for ; seen < len(lines); seen++ {
				if containsAll(lines[seen], subs) {
					return lines[seen], true
				}
			}
			return "", false
		case <-deadline.C:
			return "", false
		}
	}
}

var logAttr = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// LogAttr returns attribute key of a slog text line ("" if absent).
func LogAttr(line, key string) string {
	for _, m := range logAttr.FindAllStringSubmatch(line, -1) {
		if m[1] == key {
			v := m[2]
			if strings.HasPrefix(v, `"`) {
				var s string
				if err := json.Unmarshal([]byte(v), &s); err == nil {
					return s
				}
			}
			return v
		}
	}
	return ""
}

// RunCLI runs the binary to completion (bounded by 20s) and returns its
// stdout and exit code; stderr is logged.
func RunCLI(t testing.TB, args ...string) (string, int) {
	t.Helper()
	out, errs, code := RunCLIErr(t, args...)
	if errs != "" {
		t.Logf("wasmsched %s: stderr: %s", strings.Join(args, " "), strings.TrimSpace(errs))
	}
	return out, code
}

// RunCLIErr runs the binary to completion (bounded by 20s) and returns its
// stdout, stderr and exit code.
func RunCLIErr(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = cleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// WaitFor polls cond every 10ms until it holds or d has passed (then fails
// the test, naming what).
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
