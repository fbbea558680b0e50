package worker

import (
	"bytes"
	"log/slog"
	"sync"
)

// lineLogger is an io.Writer that logs each complete line (and keeps
// what it is written in tail, when set).
type lineLogger struct {
	log    *slog.Logger
	stream string
	tail   *tailBuf
	mu     sync.Mutex
	buf    []byte
}

const maxLogLine = 64 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	if l.tail != nil {
		l.tail.add(p)
	}
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
