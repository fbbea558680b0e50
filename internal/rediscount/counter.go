package rediscount

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Counter is a redis.Hook counting commands by name. The zero value is not
// usable; make one with New.
type Counter struct {
	name func(sha string) string

	mu sync.Mutex
	n  map[string]int64
}

// New returns a Counter that names an EVALSHA "script NAME" when
// scriptName(sha) returns a name (storage.ScriptName), else "EVALSHA".
// scriptName may be nil.
func New(scriptName func(sha string) string) *Counter {
	return &Counter{name: scriptName, n: map[string]int64{}}
}

// Hook adds c to every client given and returns c.
func (c *Counter) Hook(clients ...redis.UniversalClient) *Counter {
	for _, cl := range clients {
		cl.AddHook(c)
	}
	return c
}

// Counts returns the counts since the last Reset, by name: upper-case
// command names (GET, ZRANGE, ...) and "script NAME". A connection's
// handshake (HELLO, CLIENT, AUTH, SELECT) is not counted.
func (c *Counter) Counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// Total returns the number of commands counted since the last Reset.
func (c *Counter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	for _, v := range c.n {
		t += v
	}
	return t
}

// Reset forgets the counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.n = map[string]int64{}
	c.mu.Unlock()
}

// Name is the name Counter counts cmd under.
func (c *Counter) Name(cmd redis.Cmder) string {
	n := strings.ToUpper(cmd.Name())
	if n != "EVALSHA" || c.name == nil {
		return n
	}
	if args := cmd.Args(); len(args) > 1 {
		if sha, ok := args[1].(string); ok {
			if s := c.name(sha); s != "" {
				return "script " + s
			}
		}
	}
	return n
}

func (c *Counter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	for _, cmd := range cmds {
		if n := c.Name(cmd); !handshake[n] {
			c.n[n]++
		}
	}
	c.mu.Unlock()
}

// handshake names what go-redis sends when it opens a connection: a cost
// per connection, not per operation, so not counted.
var handshake = map[string]bool{"HELLO": true, "CLIENT": true, "AUTH": true, "SELECT": true}

// DialHook implements redis.Hook.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*Counter)(nil)
