package storage

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// Placement: a worker's profile (labels, groups) and what a run may use.
// The scripts keep the profiles in Keys.Placement and match them
// (_lib.lua "Placement"); these are the Go side's reads and checks.

// WorkerPlacement is what a worker says of itself for placement: the
// labels it carries (a group may require some: GroupSettings.Require) and
// the groups it serves (names, or patterns where '*' matches any text;
// none: every group). A run goes only to a worker that serves its group and
// carries every label it requires.
type WorkerPlacement struct {
	Labels []abi.Label
	Groups []string
}

// Validate checks the labels (as run labels) and the groups (names or
// patterns, at most limits.MaxWorkerGroups): ErrInvalid naming the bad one.
func (p WorkerPlacement) Validate() error {
	_, err := p.encode("worker placement")
	return err
}

// encode is the placement hash's value: "labels 0x1e groups" ("" for none).
func (p WorkerPlacement) encode(op string) (string, error) {
	if len(p.Labels) == 0 && len(p.Groups) == 0 {
		return "", nil
	}
	ls, err := limits.NormalizeLabels("labels", p.Labels, abi.MaxLabels)
	if err != nil {
		return "", invalid(op, "%v", err)
	}
	if err := limits.ValidateGroups(p.Groups); err != nil {
		return "", fmt.Errorf("storage: %s: %w", op, err)
	}
	return encodeLabels(ls) + "\x1e" + strings.Join(p.Groups, ","), nil
}

// decodePlacement parses the placement hash's value.
func decodePlacement(v string) WorkerPlacement {
	ls, gs, _ := strings.Cut(v, "\x1e")
	p := WorkerPlacement{Labels: decodeLabels(ls)}
	if gs != "" {
		p.Groups = strings.Split(gs, ",")
	}
	return p
}

// WorkerCapacity is a live worker's slots and placement (LiveCapacity).
type WorkerCapacity struct {
	Slots     int
	Placement WorkerPlacement
}

// Serves reports whether the worker takes runs of group: it has no
// groups, or one of them matches ('*' matches any text, as the scripts
// match: _lib.lua glob_match).
func (p WorkerPlacement) Serves(group string) bool {
	if len(p.Groups) == 0 {
		return true
	}
	for _, pat := range p.Groups {
		if abi.MatchGroup(pat, group) {
			return true
		}
	}
	return false
}

// Carries reports whether the worker has every label of req.
func (p WorkerPlacement) Carries(req []abi.Label) bool {
	for _, l := range req {
		i := slices.IndexFunc(p.Labels, func(x abi.Label) bool { return x.Key == l.Key })
		if i < 0 || p.Labels[i].Value != l.Value {
			return false
		}
	}
	return true
}

// LiveCapacity reads the live workers' slot counts and placement profiles
// (a few pipelined reads): what a run with requirements could ever get.
func (s *Store) LiveCapacity(ctx context.Context) ([]WorkerCapacity, error) {
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: live capacity: %w", err)
	}
	ws, err := s.c.ZRangeByScore(ctx, s.k.Workers(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil || len(ws) == 0 {
		if err != nil {
			err = fmt.Errorf("storage: live capacity: %w", err)
		}
		return nil, err
	}
	cmds := make([]*redis.StringCmd, len(ws))
	var pl *redis.MapStringStringCmd
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, w := range ws {
			cmds[i] = p.HGet(ctx, s.k.Worker(w), "slots")
		}
		pl = p.HGetAll(ctx, s.k.Placement())
		return nil
	}); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("storage: live capacity: %w", err)
	}
	out := make([]WorkerCapacity, 0, len(ws))
	for i, w := range ws {
		n, _ := cmds[i].Int()
		out = append(out, WorkerCapacity{Slots: n, Placement: decodePlacement(pl.Val()[w])})
	}
	return out, nil
}
