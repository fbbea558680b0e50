package storage

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// Every script gets the helpers of _lib.lua it uses (local functions,
// transitively: libFor) prepended at embed time: a helper defined but not
// used would still be made, a closure of garbage, on every call. fenced lists the leader-authority scripts: _prelude.lua is prepended
// to each as well, after the helpers (KEYS[1]=fence, KEYS[2]=lock, ARGV[1]=epoch, ARGV[2]=holder).
var fenced = map[string]bool{
	"apply":          true,
	"due":            true,
	"fire_schedule":  true,
	"drain":          true,
	"expire":         true,
	"allocate_batch": true,
	"restore_apply":  true,
	"fail_run":       true,
	"reap":           true,
	"tick":           true,
	"series":         true,
	"settings":       true,
}

// scriptSrc holds the source of every script as sent to Redis, by name (file
// name without ".lua"); scripts the loaded-script handles.
var scriptSrc = map[string]string{}

var scripts = func() map[string]*redis.Script {
	prelude, err := scriptFS.ReadFile("scripts/_prelude.lua")
	if err != nil {
		panic(err)
	}
	lib, err := scriptFS.ReadFile("scripts/_lib.lua")
	if err != nil {
		panic(err)
	}
	ents, err := scriptFS.ReadDir("scripts")
	if err != nil {
		panic(err)
	}
	m := map[string]*redis.Script{}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "_") || !strings.HasSuffix(n, ".lua") {
			continue
		}
		b, err := scriptFS.ReadFile("scripts/" + n)
		if err != nil {
			panic(err)
		}
		name := strings.TrimSuffix(n, ".lua")
		src := string(b)
		if fenced[name] {
			src = string(prelude) + "\n" + src
		}
		src = libFor(string(lib), src) + "\n" + src
		scriptSrc[name] = src
		m[name] = redis.NewScript(src)
	}
	return m
}()

// libFor returns the helpers of lib (its "local function NAME" blocks, in
// lib's order, each up to the next) that src calls, and those they call.
func libFor(lib, src string) string {
	type fn struct{ name, body string }
	var fns []fn
	for _, part := range strings.SplitAfter(lib, "\nend\n") {
		i := strings.Index(part, "local function ")
		if i < 0 {
			continue
		}
		body := part[i:]
		name := body[len("local function "):strings.IndexByte(body, '(')]
		fns = append(fns, fn{name, body})
	}
	used := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, f := range fns {
			if used[f.name] {
				continue
			}
			call := f.name + "("
			if strings.Contains(src, call) {
				used[f.name], changed = true, true
				continue
			}
			for _, g := range fns {
				if used[g.name] && strings.Contains(g.body, call) {
					used[f.name], changed = true, true
					break
				}
			}
		}
	}
	var out strings.Builder
	for _, f := range fns {
		if used[f.name] {
			out.WriteString(f.body)
		}
	}
	return out.String()
}

// scriptNames lists the embedded scripts (sorted).
func scriptNames() []string {
	var out []string
	for n := range scripts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ScriptName names the embedded script whose SHA1 is sha ("" if none is):
// what a SLOWLOG or a command hook sees of a script is its EVALSHA.
func ScriptName(sha string) string {
	for n, sc := range scripts {
		if sc.Hash() == sha {
			return n
		}
	}
	return ""
}

// Load preloads every script (SCRIPT LOAD). On Redis Cluster it loads
// every script on every shard's master (ForEachShard). Calling it is
// optional: run reloads a script on NOSCRIPT by itself.
func (s *Store) Load(ctx context.Context) error {
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			for _, n := range scriptNames() {
				if err := shard.ScriptLoad(ctx, scriptSrc[n]).Err(); err != nil {
					return fmt.Errorf("storage: load script %s on %s: %w", n, shard.Options().Addr, err)
				}
			}
			return nil
		})
	}
	for _, n := range scriptNames() {
		if err := scripts[n].Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("storage: load script %s: %w", n, err)
		}
	}
	return nil
}

// run executes script name via EVALSHA; on NOSCRIPT (after SCRIPT FLUSH or a
// Redis restart) it loads the script and retries once. Script error replies
// are mapped by scriptErr with op as the operation name.
func (s *Store) run(ctx context.Context, op, name string, keys []string, args ...any) (any, error) {
	sc := scripts[name]
	if sc == nil {
		return nil, fmt.Errorf("storage: %s: no script %q", op, name)
	}
	if s.waitsFor(ctx, name) {
		return s.runDurable(ctx, op, name, sc, keys, args)
	}
	v, err := sc.EvalSha(ctx, s.c, keys, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if _, cluster := s.c.(*redis.ClusterClient); cluster {
			// One shard lost its script cache (failover to a replica,
			// restart): EVAL is routed by the keys to that shard, runs the
			// script once and caches it there, without depending on the
			// other shards being reachable.
			v, err = sc.Eval(ctx, s.c, keys, args...).Result()
		} else {
			if lerr := sc.Load(ctx, s.c).Err(); lerr != nil {
				return nil, fmt.Errorf("storage: %s: reload script %s: %w", op, name, lerr)
			}
			v, err = sc.EvalSha(ctx, s.c, keys, args...).Result()
		}
	}
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, s.noteRefusal(scriptErr(op, err))
	}
	return v, nil
}

// noteRefusal records when Redis refused a write at maxmemory and returns
// err unchanged.
func (s *Store) noteRefusal(err error) error {
	if errors.Is(err, ErrOutOfMemory) {
		s.refused.Store(time.Now().UnixNano())
	}
	return err
}

// scriptCall is one call of a pipelined batch (runPipe).
type scriptCall struct {
	keys []string
	args []any
}

// runPipe sends every call of script name in ONE pipeline (EVALSHA each)
// and returns each call's reply and error, in order: errors are per call
// (mapped by scriptErr with op), never for the batch. Calls answered
// NOSCRIPT (SCRIPT FLUSH, restart, failover) are sent again after reloading
// the script (on a cluster: as EVAL, routed to the shard that lost it), in
// a second pipeline.
func (s *Store) runPipe(ctx context.Context, op, name string, calls []scriptCall) ([]any, []error) {
	vals := make([]any, len(calls))
	errs := make([]error, len(calls))
	if len(calls) == 0 {
		return vals, errs
	}
	if len(calls) == 1 { // no pipeline for one call (one round trip either way)
		vals[0], errs[0] = s.run(ctx, op, name, calls[0].keys, calls[0].args...)
		return vals, errs
	}
	sc := scripts[name]
	if sc == nil {
		return vals, fill(errs, fmt.Errorf("storage: %s: no script %q", op, name))
	}
	p := &pipeRun{s: s, op: op, sc: sc, calls: calls, vals: vals, errs: errs, c: s.c}
	_, p.cluster = s.c.(*redis.ClusterClient)
	if p.durable = s.waitsFor(ctx, name); p.durable {
		// WAIT on the connection that sent the scripts: on a cluster, the
		// namespace's shard directly (durable.go).
		w, err := s.writer(ctx)
		if err != nil {
			return vals, fill(errs, err)
		}
		p.c, p.cluster = w, false
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	cmds, wait := p.send(ctx, all, false)
	var retry, done []int
	for j, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, all[j])
			continue
		}
		p.result(all[j], cmd)
		done = append(done, all[j])
	}
	p.replicated(ctx, done, wait)
	if len(retry) == 0 {
		return vals, errs
	}
	if !p.cluster {
		if lerr := sc.Load(ctx, p.c).Err(); lerr != nil {
			for _, i := range retry {
				errs[i] = fmt.Errorf("storage: %s: reload script %s: %w", op, name, lerr)
			}
			return vals, errs
		}
	}
	cmds, wait = p.send(ctx, retry, p.cluster)
	for j, cmd := range cmds {
		p.result(retry[j], cmd)
	}
	p.replicated(ctx, retry, wait)
	return vals, errs
}

// fill sets every error of errs to err and returns errs.
func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// pipeRun is one runPipe: the calls of one script, their results, and
// the connection they go on.
type pipeRun struct {
	s                *Store
	op               string
	sc               *redis.Script
	calls            []scriptCall
	vals             []any
	errs             []error
	c                redis.Cmdable
	cluster, durable bool
}

// send pipelines the calls idx (EVAL when eval, else EVALSHA), with a
// WAIT after them when the store waits for replicas.
func (p *pipeRun) send(ctx context.Context, idx []int, eval bool) ([]*redis.Cmd, *redis.Cmd) {
	cmds := make([]*redis.Cmd, len(idx))
	var wait *redis.Cmd
	_, _ = p.c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for j, i := range idx {
			if eval {
				cmds[j] = p.sc.Eval(ctx, pl, p.calls[i].keys, p.calls[i].args...)
			} else {
				cmds[j] = p.sc.EvalSha(ctx, pl, p.calls[i].keys, p.calls[i].args...)
			}
		}
		if p.durable {
			wait = p.s.waitCmd(ctx, pl)
		}
		return nil
	})
	return cmds, wait
}

// result keeps call i's answer.
func (p *pipeRun) result(i int, cmd *redis.Cmd) {
	p.vals[i], p.errs[i] = pipeResult(p.op, cmd)
	p.s.noteRefusal(p.errs[i])
}

// replicated turns the calls that succeeded into ErrNotReplicated when
// their pipeline's WAIT saw no replica acknowledge them.
func (p *pipeRun) replicated(ctx context.Context, idx []int, wait *redis.Cmd) {
	if wait == nil {
		return
	}
	if n, err := wait.Int64(); err == nil && n >= 1 {
		return
	}
	for _, i := range idx {
		if p.errs[i] == nil {
			p.errs[i] = p.s.notReplicated(ctx, p.op, wait)
		}
	}
}

func pipeResult(op string, c *redis.Cmd) (any, error) {
	v, err := c.Result()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, scriptErr(op, err)
	}
	return v, nil
}
