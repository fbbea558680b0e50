package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// GetRuns reads runs by id in one round trip, in the order given; an id
// that does not exist (or expired) is left out. At most MaxGetRuns ids.
func (c *Client) GetRuns(ctx context.Context, ids []string) ([]Run, error) {
	rs, err := c.st.GetRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	return runsOf(rs), nil
}

// Slots reads the namespace's workers and slots (one round trip).
func (c *Client) Slots(ctx context.Context) (Slots, error) {
	v, err := c.st.Slots(ctx)
	if err != nil {
		return Slots{}, err
	}
	return slotsOf(v), nil
}

// LostRun is the report of a run a worker executed that the store no
// longer has (Redis lost it in a failover, or the store was wiped).
type LostRun struct {
	At      int64  `json:"at_ms"` // Redis TIME (ms) of the report
	Run     string `json:"run"`
	Token   string `json:"token"` // the assignment token the run ran under
	Outcome string `json:"outcome"`
	Worker  string `json:"worker"`
	Reason  string `json:"reason,omitempty"`
}

// LostRuns returns up to limit lost-run reports (0: all kept, at most
// 1,000), the newest first.
func (c *Client) LostRuns(ctx context.Context, limit int) ([]LostRun, error) {
	ls, err := c.st.LostRuns(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]LostRun, 0, len(ls))
	for _, l := range ls {
		out = append(out, LostRun{At: l.At, Run: l.Run, Token: l.Token, Outcome: string(l.Outcome), Worker: l.Worker, Reason: l.Reason})
	}
	return out, nil
}

// Leader reads who leads the namespace and its last tick.
func (c *Client) Leader(ctx context.Context) (Leader, error) {
	li, err := c.st.Leader(ctx)
	if err != nil {
		return Leader{}, err
	}
	out := Leader{Namespace: c.st.Namespace(), Identity: li.Identity, Epoch: li.Epoch}
	if li.Identity != "" {
		out.Since = timePtr(li.Since)
	}
	tk, err := c.st.LastTick(ctx)
	if err != nil {
		return Leader{}, err
	}
	if tk.Holder != "" {
		out.LastTick = &Tick{Holder: tk.Holder, Epoch: tk.Epoch, At: tk.At.UTC(), Count: tk.Count}
	}
	return out, nil
}

// Policies lists the policies pushed to the namespace's registry, by name
// (a built-in that was never pushed is not in the registry; Builtin is
// false on every entry: the client does not carry the built-in modules).
func (c *Client) Policies(ctx context.Context) ([]Policy, error) {
	ps, err := c.st.ListPolicies(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Policy, 0, len(ps))
	for _, p := range ps {
		out = append(out, policyOf(p, false))
	}
	return out, nil
}

// ParseRetention reads a retention as the CLI's flags and the HTTP API
// take it: a Go duration of at least 1ms ("36h"), whole days ("7d"),
// "forever" (or "0") to keep finished runs forever, and, with
// allowDefault, "default" (RetentionDefault: the namespace's default).
func ParseRetention(s string, allowDefault bool) (time.Duration, error) {
	t := strings.TrimSpace(s)
	hint := "a duration (36h), whole days (7d) or forever"
	if allowDefault {
		hint += ", or default"
	}
	switch {
	case t == "default" && allowDefault:
		return RetentionDefault, nil
	case t == "0" || t == "forever":
		return 0, nil
	case strings.HasSuffix(t, "d"):
		n, err := strconv.Atoi(strings.TrimSuffix(t, "d"))
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("retention %q: want %s: %w", s, hint, ErrInvalid)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("retention %q: want %s: %w", s, hint, ErrInvalid)
	}
	return d, nil
}
