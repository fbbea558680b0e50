package engine

import (
	"context"
	"sync"

	"github.com/wasmsched/wasmsched/policies"
)

// Share holds the loaded policy versions of one wasm runtime for
// every PolicySet that uses it: in a Multi, the sets of all its namespaces.
// A version (name and sha256) is loaded once, one compiled module and one
// instance pool however many namespaces decide with it, and closed when
// the last set holding it lets go. Each set keeps its own PolicyRef for the
// version (holds, retirement, auto-rollback counts, metrics): only the
// *policies.Policy is shared. Safe for concurrent use.
type Share struct {
	rt *policies.Runtime

	mu sync.Mutex
	m  map[string]*sharedPolicy // name@sha256
}

type sharedPolicy struct {
	ready chan struct{} // closed when the load ended (pol or err set)
	pol   *policies.Policy
	err   error
	sets  int // PolicySets holding pol
}

// NewShare returns an empty table over rt.
func NewShare(rt *policies.Runtime) *Share {
	return &Share{rt: rt, m: map[string]*sharedPolicy{}}
}

// acquire returns the loaded version key (name@sha256 of wasm) for one more
// set, loading it if no set holds it. Concurrent acquires of one key load
// it once; if that load fails, each waiter that still has time loads it
// itself (the loader's context may have been the cause).
func (sh *Share) acquire(ctx context.Context, key, name string, wasm []byte) (*policies.Policy, error) {
	for {
		sh.mu.Lock()
		e, ok := sh.m[key]
		if !ok {
			e = &sharedPolicy{ready: make(chan struct{})}
			sh.m[key] = e
			sh.mu.Unlock()
			pol, err := sh.rt.Load(ctx, name, wasm)
			sh.mu.Lock()
			e.pol, e.err = pol, err
			if err != nil {
				delete(sh.m, key)
			} else {
				e.sets++
			}
			close(e.ready)
			sh.mu.Unlock()
			return pol, err
		}
		sh.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sh.mu.Lock()
		if e.err == nil && sh.m[key] == e {
			e.sets++
			sh.mu.Unlock()
			return e.pol, nil
		}
		sh.mu.Unlock()
		// The load failed, or the version was closed after it: try again.
	}
}

// release drops one set's hold on pol (acquired as key) and closes it if
// that was the last; it reports whether it closed it.
func (sh *Share) release(ctx context.Context, key string, pol *policies.Policy) (closed bool, err error) {
	sh.mu.Lock()
	e := sh.m[key] // acquire put it there; it leaves only with its last holder
	e.sets--
	last := e.sets == 0
	if last {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
	if !last {
		return false, nil
	}
	return true, pol.Close(ctx)
}
