package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/internal/limits"
)

// LostRun is the report of a run a worker executed that the store no
// longer has: Redis lost it (a failover to a replica that had not received
// the submit or the launch). Nothing else remembers it: the worker keeps
// it here so an operator can see what ran and resubmit if needed.
type LostRun struct {
	At      int64  `json:"at_ms"` // Redis TIME (ms) of the report
	Run     string `json:"run"`
	Token   string `json:"token"`
	Outcome State  `json:"outcome"`
	Worker  string `json:"worker"`
	Reason  string `json:"reason,omitempty"`
}

// NoteLost keeps l (Run, Token, Outcome, Worker, Reason) in keyspace.Keys.Lost(),
// the newest first, at most MaxLostReports.
func (s *Store) NoteLost(ctx context.Context, l LostRun) error {
	if l.Run == "" || l.Token == "" {
		return invalid("note lost", "empty run or token")
	}
	reason := strings.ReplaceAll(l.Reason, "|", "/")
	_, err := s.run(ctx, "note lost", "note_lost", []string{s.k.Lost()},
		l.Run, l.Token, l.Worker, string(l.Outcome), reason, limits.MaxLostReports)
	return err
}

// LostRuns returns up to limit lost-run reports, the newest first.
func (s *Store) LostRuns(ctx context.Context, limit int) ([]LostRun, error) {
	if limit <= 0 || limit > limits.MaxLostReports {
		limit = limits.MaxLostReports
	}
	vals, err := s.c.LRange(ctx, s.k.Lost(), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: lost runs: %w", err)
	}
	out := make([]LostRun, 0, len(vals))
	for _, v := range vals {
		// ms|run|token|outcome|worker|reason: run, token and outcome hold
		// no '|'; the worker identity may, so the reason (no '|') is last.
		p := strings.SplitN(v, "|", 5)
		if len(p) < 5 {
			continue
		}
		at, _ := strconv.ParseInt(p[0], 10, 64)
		worker, reason := p[4], ""
		if i := strings.LastIndexByte(p[4], '|'); i >= 0 {
			worker, reason = p[4][:i], p[4][i+1:]
		}
		out = append(out, LostRun{At: at, Run: p[1], Token: p[2], Outcome: State(p[3]), Worker: worker, Reason: reason})
	}
	return out, nil
}
