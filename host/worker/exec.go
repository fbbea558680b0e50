package worker

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// execute runs the worker's program for run in its own process group and
// waits for it or for a kill.
func (w *Agent) execute(e *execution, run storage.Run, log *slog.Logger) *finished {
	cmd := exec.Command(w.Exec, w.ExecArgs...)
	cmd.Env = append(os.Environ(),
		"WASMSCHED_RUN_ID="+run.ID,
		"WASMSCHED_GROUP="+run.Group,
		"WASMSCHED_PAYLOAD="+run.Payload,
		"WASMSCHED_NAMESPACE="+w.Store.Namespace(),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := &lineLogger{log: log, stream: "stdout"}
	stderr := &lineLogger{log: log, stream: "stderr"}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Bound the wait for output pipes held open by grandchildren that
	// escaped the process group.
	cmd.WaitDelay = w.StopGrace
	if err := cmd.Start(); err != nil {
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: fmt.Sprintf("start %s: %v", w.Exec, err)}
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var why killReason
	var err error
	select {
	case err = <-waited:
	case why = <-e.stop:
		pgid := cmd.Process.Pid
		log.Info("killing run process group", "pgid", pgid, "signal", "SIGTERM")
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(w.StopGrace)
		select {
		case err = <-waited:
			t.Stop()
		case <-t.C:
			log.Warn("process group outlived the grace period", "pgid", pgid, "signal", "SIGKILL", "grace", w.StopGrace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-waited
		}
		// Leftovers of the group (the leader exited on SIGTERM but a
		// child ignored it) are killed too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	stdout.flush()
	stderr.flush()
	if why != 0 {
		return why.result(e)
	}
	if err == nil {
		return &finished{run: e.run, token: e.token, outcome: storage.StateSucceeded}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: ee.Error()}
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// The program exited 0 but left its output open: treat as done.
		return &finished{run: e.run, token: e.token, outcome: storage.StateSucceeded}
	}
	return &finished{run: e.run, token: e.token, outcome: storage.StateFailed, reason: err.Error()}
}

// lineLogger is an io.Writer that logs each complete line.
type lineLogger struct {
	log    *slog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
}

const maxLogLine = 64 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) >= maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	l.log.Info("run output", "stream", l.stream, "line", string(bytes.TrimSuffix(line, []byte("\r"))))
}
