package storage

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wasmsched/wasmsched/internal/limits"
)

// Progress is what a run's handler last reported of its attempt.
type Progress struct {
	// Fraction done, 0 to 1; -1 when the handler did not say.
	Fraction float64
	// Message, at most limits.MaxProgressMessage bytes.
	Message string
	// At is when it was written (Redis time).
	At time.Time
}

// SetProgress records the progress of run, RUNNING under token on worker
// identity (progress.lua): fraction 0 to 1, or -1 for none. It returns
// false, writing nothing, when the run no longer runs under that token
// there. The worker library rate-limits it (worker.ProgressEvery).
func (s *Store) SetProgress(ctx context.Context, identity, run, token string, fraction float64, msg string) (bool, error) {
	const op = "progress"
	if err := validateWorker(identity); err != nil {
		return false, err
	}
	if err := limits.ValidateName("run", run); err != nil {
		return false, err
	}
	if fraction != -1 && !(fraction >= 0 && fraction <= 1) {
		return false, invalid(op, "run %s: fraction %v: want 0 to 1", run, fraction)
	}
	if len(msg) > limits.MaxProgressMessage || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x1f\x1e") {
		return false, invalid(op, "run %s: the message is %d bytes, at most %d of valid UTF-8", run, len(msg), limits.MaxProgressMessage)
	}
	f := ""
	if fraction >= 0 {
		f = strconv.FormatFloat(fraction, 'f', -1, 64)
	}
	v, err := s.run(ctx, op, "progress", []string{s.k.Run(run)}, run, identity, token, f, msg, s.k.RunEvents())
	if err != nil {
		return false, err
	}
	return toInt64(v) == 1, nil
}

// parseProgress decodes the run field progress ("fraction␟message␟at").
func parseProgress(v string) *Progress {
	if v == "" {
		return nil
	}
	p := strings.SplitN(v, "\x1f", 3)
	if len(p) != 3 {
		return nil
	}
	out := &Progress{Fraction: -1, Message: p[1]}
	if f, err := strconv.ParseFloat(p[0], 64); err == nil {
		out.Fraction = f
	}
	at, _ := strconv.ParseInt(p[2], 10, 64)
	out.At = time.UnixMilli(at)
	return out
}
