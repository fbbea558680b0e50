package redistest

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Recorder is a go-redis hook that records every command a client sends,
// pipelined ones included: its name (for EVALSHA, the script's name if
// Name was told its SHA) and its argument count. Tests count what an
// operation costs in commands, a count and never a time.
type Recorder struct {
	mu   sync.Mutex
	cmds []Command
	name func(sha string) string
}

// Command is one recorded command.
type Command struct {
	Name string // upper case: GET, EVALSHA, ...; a script named by NameScripts: "script NAME"
	Args int    // arguments after the name
	Keys int    // EVALSHA/EVAL: the script's key count
}

// Record hooks r into c and returns it.
func Record(c redis.UniversalClient) *Recorder {
	r := &Recorder{}
	c.AddHook(r)
	return r
}

// NameScripts names EVALSHA commands by their script: name(sha) returns
// the name ("" leaves the command EVALSHA), e.g. storage.ScriptName.
func (r *Recorder) NameScripts(name func(sha string) string) {
	r.mu.Lock()
	r.name = name
	r.mu.Unlock()
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.cmds = nil
	r.mu.Unlock()
}

// Commands returns what was recorded since the last Reset.
func (r *Recorder) Commands() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Command(nil), r.cmds...)
}

// Count returns how many recorded commands have the given name.
func (r *Recorder) Count(name string) int {
	n := 0
	for _, c := range r.Commands() {
		if c.Name == name {
			n++
		}
	}
	return n
}

func (r *Recorder) add(cmd redis.Cmder) {
	args := cmd.Args()
	c := Command{Name: strings.ToUpper(cmd.Name()), Args: len(args) - 1}
	if (c.Name == "EVALSHA" || c.Name == "EVAL") && len(args) >= 3 {
		if n, ok := args[2].(int); ok {
			c.Keys = n
		}
		if sha, ok := args[1].(string); ok && c.Name == "EVALSHA" {
			r.mu.Lock()
			if r.name != nil {
				if name := r.name(sha); name != "" {
					c.Name = "script " + name
				}
			}
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	r.mu.Unlock()
}

// DialHook implements redis.Hook.
func (r *Recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (r *Recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (r *Recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			r.add(c)
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*Recorder)(nil)
