package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// PauseGroup pauses group name: the leader asks its policy nothing and
// launches nothing until ResumeGroup (a decision made before is stale);
// submits are accepted and its active runs go on. who is recorded.
// ErrNotFound for an unknown group.
func (s *Store) PauseGroup(ctx context.Context, name, who string) error {
	return s.groupControl(ctx, "pause", name, who)
}

// ResumeGroup resumes a paused group: it is decided again at once.
func (s *Store) ResumeGroup(ctx context.Context, name string) error {
	return s.groupControl(ctx, "resume", name, "")
}

func (s *Store) groupControl(ctx context.Context, op, name, who string) error {
	if err := limits.ValidateName("group", name); err != nil {
		return err
	}
	if len(who) > maxStopReason {
		return invalid(op+" group", "who is %d bytes, at most %d", len(who), maxStopReason)
	}
	k := s.k
	_, err := s.run(ctx, op+" group", "group_control", []string{k.Group(name), k.Dirty()}, op, name, who, k.WorkEvents())
	return err
}

// DiscardWaiting discards every WAITING run of group name (the delayed
// ones too), oldest first, deleteChunk per script, each with reason, and
// reports how many; active runs go on. ErrNotFound for an unknown group.
//
// With labels, only the waiting runs carrying every one of them are
// discarded: the queue is read deleteChunk at a time (its due runs, then
// the delayed ones), each chunk's labels read in one pipeline, and the
// matching runs of the chunk discarded by one script; a run submitted
// while it goes may be left.
func (s *Store) DiscardWaiting(ctx context.Context, name, reason string, labels ...abi.Label) (int, error) {
	if len(labels) == 0 {
		return s.discardLoop(ctx, "discard waiting", name, "2", reason)
	}
	const op = "discard waiting"
	if err := limits.ValidateName("group", name); err != nil {
		return 0, err
	}
	if len(reason) > maxStopReason {
		return 0, invalid(op, "reason is %d bytes, at most %d", len(reason), maxStopReason)
	}
	ls, err := limits.NormalizeLabels("labels", labels, abi.MaxLabels)
	if err != nil {
		return 0, invalid(op, "%v", err)
	}
	k := s.k
	if _, err := s.GetGroup(ctx, name); err != nil {
		return 0, err
	}
	discarded := 0
	for _, zset := range []string{k.Waiting(name), k.Delayed(name)} {
		for skip := int64(0); ; {
			ids, err := s.c.ZRange(ctx, zset, skip, skip+deleteChunk-1).Result()
			if err != nil {
				return discarded, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
			if len(ids) == 0 {
				break
			}
			match, err := s.matchLabels(ctx, ids, ls)
			if err != nil {
				return discarded, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
			skip += int64(len(ids) - len(match)) // the others stay: read past them
			if len(match) == 0 {
				continue
			}
			keys := []string{k.Groups(), k.Group(name), k.Waiting(name), k.Active(name), k.Dirty(), k.WaitInfo(name), k.Finished(name), k.Retire(),
				k.Delayed(name), k.Timers(), k.Launches(name)}
			args := []any{name, "2", reason, k.RunEvents()}
			for _, id := range match {
				keys = append(keys, k.Run(id))
				args = append(args, id)
			}
			v, err := s.run(ctx, op, "delete_group", keys, args...)
			if err != nil {
				return discarded, err
			}
			n := int(toInt64(v.([]any)[2]))
			discarded += n
			skip += int64(len(match) - n) // matched but not discarded (left the queue meanwhile)
		}
	}
	return discarded, nil
}

// matchLabels returns the ids whose runs carry every label of ls (their
// labels read in one pipeline).
func (s *Store) matchLabels(ctx context.Context, ids []string, ls []abi.Label) ([]string, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.k.Run(id), "labels")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	f := RunFilter{Labels: ls}
	var out []string
	for i, id := range ids {
		r := Run{Labels: decodeLabels(cmds[i].Val())}
		if f.match(&r) {
			out = append(out, id)
		}
	}
	return out, nil
}

// discardLoop calls delete_group until it is done: mode "0" delete, "1"
// discard then delete, "2" discard only.
func (s *Store) discardLoop(ctx context.Context, op, name, mode, reason string) (discarded int, err error) {
	if err := limits.ValidateName("group", name); err != nil {
		return 0, err
	}
	if len(reason) > maxStopReason {
		return 0, invalid(op, "reason is %d bytes, at most %d", len(reason), maxStopReason)
	}
	k := s.k
	for {
		keys := []string{k.Groups(), k.Group(name), k.Waiting(name), k.Active(name), k.Dirty(), k.WaitInfo(name), k.Finished(name), k.Retire(),
			k.Delayed(name), k.Timers(), k.Launches(name)}
		args := []any{name, mode, reason, k.RunEvents()}
		var ids []string
		if mode != "0" {
			if ids, err = s.c.ZRange(ctx, k.Waiting(name), 0, deleteChunk-1).Result(); err == nil && len(ids) == 0 {
				ids, err = s.c.ZRange(ctx, k.Delayed(name), 0, deleteChunk-1).Result()
			}
			if err != nil {
				return discarded, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
		}
		for _, id := range ids {
			keys = append(keys, k.Run(id))
			args = append(args, id)
		}
		v, err := s.run(ctx, op, "delete_group", keys, args...)
		if err != nil {
			return discarded, err
		}
		a := v.([]any)
		left := int(toInt64(a[1]))
		discarded += int(toInt64(a[2]))
		if toInt64(a[0]) == 1 || (mode == "2" && len(ids) == 0) {
			return discarded, nil
		}
		if len(ids) == 0 && left > 0 {
			return discarded, fmt.Errorf("storage: %s %s: %d waiting runs not discarded", op, name, left)
		}
	}
}

// StopActive asks every active run of group name to stop (RequestStop,
// pipelined deleteChunk at a time) with reason and reports how many it
// asked; a run that ended meanwhile is skipped. With labels, only the
// active runs carrying every one of them.
func (s *Store) StopActive(ctx context.Context, name, reason string, labels ...abi.Label) (int, error) {
	const op = "stop active"
	if err := limits.ValidateName("group", name); err != nil {
		return 0, err
	}
	if len(reason) > maxStopReason {
		return 0, invalid(op, "reason is %d bytes, at most %d", len(reason), maxStopReason)
	}
	k := s.k
	ids, err := s.c.ZRange(ctx, k.Active(name), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("storage: %s %s: %w", op, name, err)
	}
	if len(ids) == 0 {
		// nothing to stop: say so of a group that does not exist, as
		// discard, pause, resume and drain do (ErrNotFound)
		if _, err := s.GetGroup(ctx, name); errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("storage: %s: group %s does not exist: %w", op, name, ErrNotFound)
		} else if err != nil {
			return 0, err
		}
	}
	if len(labels) > 0 {
		ls, err := limits.NormalizeLabels("labels", labels, abi.MaxLabels)
		if err != nil {
			return 0, invalid(op, "%v", err)
		}
		var match []string
		for lo := 0; lo < len(ids); lo += deleteChunk {
			m, err := s.matchLabels(ctx, ids[lo:min(lo+deleteChunk, len(ids))], ls)
			if err != nil {
				return 0, fmt.Errorf("storage: %s %s: %w", op, name, err)
			}
			match = append(match, m...)
		}
		ids = match
	}
	n := 0
	for lo := 0; lo < len(ids); lo += deleteChunk {
		var calls []scriptCall
		for _, id := range ids[lo:min(lo+deleteChunk, len(ids))] {
			calls = append(calls, scriptCall{
				keys: []string{k.Run(id), k.Group(name), k.Waiting(name), k.Active(name), k.Launched(), k.Dirty(), k.Finished(name),
					k.WaitInfo(name), k.Retire(), k.Delayed(name), k.LaunchInfo()},
				args: []any{id, name, reason, k.RunEvents(), k.SlotEventsPrefix(), k.WorkEvents()}})
		}
		_, errs := s.runPipe(ctx, op, "request_stop", calls)
		for _, e := range errs {
			switch {
			case e == nil:
				n++
			case errors.Is(e, ErrBadState), errors.Is(e, ErrNotFound): // ended meanwhile
			default:
				return n, e
			}
		}
	}
	return n, nil
}
