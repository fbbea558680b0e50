package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

// ErrUnknownPolicy is returned (wrapped) by PolicySet.Acquire for a name that
// is neither an active pushed policy nor a built-in.
var ErrUnknownPolicy = errors.New("unknown policy")

// VersionLen is the length of the sha256 prefix used as a policy version
// label (metrics, runs' policy_version, /status).
const VersionLen = digest.ShortLen

// PolicySet resolves policy names to loaded policy versions for one
// namespace: the active version of a pushed policy (registry, blob by
// sha256), else the built-in of that name. Loaded versions are cached; the
// resolution of names is cached per registry generation
// (storage.Store.PolicyGeneration), checked by Refresh. When a generation
// changes, every name in use is resolved again; a version that is no longer
// active is closed as soon as no decision holds it (in-flight decisions
// finish on the version they started with). Sets built by one Multi share
// loaded versions across namespaces (one instance pool per version per
// process, see Share). Safe for concurrent use.
type PolicySet struct {
	st    *storage.Store
	share *Share
	log   *slog.Logger
	m     *metrics // may be nil

	mu       sync.Mutex
	gen      int64
	genKnown bool
	active   map[string]*resolution // name -> resolution of the current generation
	loaded   map[string]*PolicyRef  // name@sha -> loaded version
	loading  map[string]chan struct{}
	closed   bool

	// Auto-rollback (hotswap.go): after rollbackAfter consecutive failures
	// (trap, timeout, invalid decision) of a pushed version, the host asks
	// storage to roll it back. 0 disables. Set before use.
	rollbackAfter int
	who           string            // recorded in the history; the host identity
	rb            *rollbackMetrics  // may be nil
	rollbackHook  func(name string) // after a rollback that happened (test hook, hotswap)
}

type resolution struct {
	ref *PolicyRef
	err error
}

// PolicyRef is one loaded policy version. Acquire returns it with a hold;
// call Release when the decision is done.
type PolicyRef struct {
	// Policy is the loaded version (do not Close it: the set does).
	Policy *policies.Policy
	// Name is the policy name.
	Name string
	// SHA256 is the full content address of the wasm.
	SHA256 string
	// Version is SHA256[:VersionLen], recorded on launched runs.
	Version string
	// Registry is the registry version number, 0 for a built-in.
	Registry int
	// LoadedAt is when the version was loaded.
	LoadedAt time.Time

	set     *PolicySet
	key     string
	refs    int // guarded by set.mu
	retired bool

	fails   atomic.Int32 // consecutive failed decisions (Failed / Succeeded)
	rolling atomic.Bool  // an auto-rollback of this version was attempted
}

// Release drops one hold taken by Acquire.
func (r *PolicyRef) Release() {
	s := r.set
	s.mu.Lock()
	r.refs--
	closeNow := r.retired && r.refs == 0 && s.unload(r)
	s.mu.Unlock()
	if closeNow {
		s.closeRef(r)
	}
}

// LoadedPolicy describes one loaded version (for /status).
type LoadedPolicy struct {
	Name     string    `json:"name"`
	Version  string    `json:"version"`
	SHA256   string    `json:"sha256"`
	Registry int       `json:"registry_version"` // 0 = built-in
	Active   bool      `json:"active"`
	InUse    int       `json:"in_use"`
	LoadedAt time.Time `json:"loaded_at"`
}

// newPolicySet returns a set loading policies through sh, which other sets
// may share.
func newPolicySet(st *storage.Store, sh *Share, log *slog.Logger) *PolicySet {
	if log == nil {
		log = slog.Default()
	}
	return &PolicySet{st: st, share: sh, log: log, active: map[string]*resolution{},
		loaded: map[string]*PolicyRef{}, loading: map[string]chan struct{}{}}
}

// Refresh reads the registry generation (one GET) and, when it changed
// since the last call, resolves again every name in use and retires the
// versions that are no longer active. It reports whether the generation
// changed. Call it at most once per coordinator pass.
func (s *PolicySet) Refresh(ctx context.Context) (bool, error) {
	gen, err := s.st.PolicyGeneration(ctx)
	if err != nil {
		return false, err
	}
	return s.refreshTo(ctx, gen)
}

// refreshTo is Refresh with the registry generation already read.
func (s *PolicySet) refreshTo(ctx context.Context, gen int64) (bool, error) {
	s.mu.Lock()
	if s.genKnown && gen == s.gen {
		s.mu.Unlock()
		return false, nil
	}
	first := !s.genKnown
	s.gen, s.genKnown = gen, true
	names := make([]string, 0, len(s.active))
	for n := range s.active {
		names = append(names, n)
	}
	s.active = map[string]*resolution{}
	s.mu.Unlock()
	if !first {
		s.log.Info("policy registry changed; reloading active versions", "generation", gen, "names", names)
	}
	for _, n := range names {
		if r, err := s.Acquire(ctx, n); err == nil {
			r.Release()
		} else if ctx.Err() != nil {
			return true, ctx.Err()
		}
	}
	s.retireInactive()
	return !first, nil
}

// retireInactive marks every loaded version that no name resolves to as
// retired and closes those that nobody holds.
func (s *PolicySet) retireInactive() {
	s.mu.Lock()
	inUse := map[*PolicyRef]bool{}
	for _, res := range s.active {
		if res.ref != nil {
			inUse[res.ref] = true
		}
	}
	var closeNow []*PolicyRef
	for _, r := range s.loaded {
		if !inUse[r] && !r.retired {
			r.retired = true
			if r.refs == 0 && s.unload(r) {
				closeNow = append(closeNow, r)
			}
		}
	}
	s.mu.Unlock()
	for _, r := range closeNow {
		s.closeRef(r)
	}
}

// unload removes r from the loaded versions (s.mu held); it reports
// whether r was there (so exactly one caller closes it).
func (s *PolicySet) unload(r *PolicyRef) bool {
	if s.loaded[r.key] != r {
		return false
	}
	delete(s.loaded, r.key)
	return true
}

// closeRef lets go of a version already removed by unload: it is closed
// unless another namespace's set still holds it.
func (s *PolicySet) closeRef(r *PolicyRef) {
	if s.m != nil {
		s.m.loaded.DeleteLabelValues(s.m.ns, r.Name, r.Version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closed, err := s.share.release(ctx, r.key, r.Policy)
	switch {
	case err != nil:
		s.log.Warn("closing retired policy version failed", "policy", r.Name, "version", r.Version, "err", err)
	case closed:
		s.log.Info("retired policy version closed", "policy", r.Name, "version", r.Version)
	default:
		s.log.Info("retired policy version released (still loaded for other namespaces)", "policy", r.Name, "version", r.Version)
	}
}

// Acquire resolves name (cached for the current generation) and returns its
// loaded version with a hold; call Release when done. Errors:
// ErrUnknownPolicy (neither pushed-and-active nor built-in), storage errors,
// policies load errors. Unknown names are cached for the generation too,
// so a group naming an unknown policy costs no Redis reads per pass.
func (s *PolicySet) Acquire(ctx context.Context, name string) (*PolicyRef, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("host: policy %s: %w", name, policies.ErrClosed)
		}
		if res, ok := s.active[name]; ok {
			if res.err != nil {
				s.mu.Unlock()
				return nil, res.err
			}
			res.ref.refs++
			s.mu.Unlock()
			return res.ref, nil
		}
		if ch, ok := s.loading[name]; ok {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		s.loading[name] = ch
		gen := s.gen
		s.mu.Unlock()

		ref, err := s.resolve(ctx, name)

		s.mu.Lock()
		delete(s.loading, name)
		close(ch)
		if ctx.Err() != nil && err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if err == nil && s.loaded[ref.key] != ref { // retired and closed meanwhile: resolve again
			s.mu.Unlock()
			continue
		}
		// Cache successes and unknown names for the generation; not other
		// errors (a Redis blip or a failed load is retried, under the
		// coordinator's per-group backoff). A racing Refresh: don't cache.
		if s.gen == gen && !s.closed && (err == nil || errors.Is(err, ErrUnknownPolicy)) {
			s.active[name] = &resolution{ref: ref, err: err}
		}
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		ref.refs++
		s.mu.Unlock()
		return ref, nil
	}
}

// resolve finds the active version of name and loads it (or reuses the
// loaded one).
func (s *PolicySet) resolve(ctx context.Context, name string) (*PolicyRef, error) {
	res, err := ResolvePolicy(ctx, s.st, name) // resolve.go
	if err != nil {
		return nil, err
	}
	sha, reg := res.SHA256, res.Registry
	key := name + "@" + sha
	s.mu.Lock()
	if r, ok := s.loaded[key]; ok {
		r.retired = false
		s.mu.Unlock()
		return r, nil
	}
	s.mu.Unlock()
	wasm, err := res.Wasm(ctx, s.st)
	if err != nil {
		return nil, err
	}
	pol, err := s.share.acquire(ctx, key, name, wasm)
	if err != nil {
		return nil, fmt.Errorf("host: load policy %s: %w", name, err)
	}
	r := &PolicyRef{Policy: pol, Name: name, SHA256: pol.Version(), Version: digest.Short(pol.Version()),
		Registry: reg, LoadedAt: time.Now(), set: s, key: key}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_, _ = s.share.release(ctx, key, pol)
		return nil, fmt.Errorf("host: policy %s: %w", name, policies.ErrClosed)
	}
	s.loaded[key] = r // new: one loader per name at a time (s.loading)
	s.mu.Unlock()
	if s.m != nil {
		s.m.loaded.WithLabelValues(s.m.ns, name, r.Version).Set(1)
	}
	src := "built-in"
	if reg > 0 {
		src = fmt.Sprintf("registry v%d", reg)
	}
	s.log.Info("policy loaded", "policy", name, "version", r.Version, "source", src, "kind", pol.Kind().String())
	return r, nil
}

// Loaded lists the loaded versions, by name and version.
func (s *PolicySet) Loaded() []LoadedPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	act := map[*PolicyRef]bool{}
	for _, res := range s.active {
		if res.ref != nil {
			act[res.ref] = true
		}
	}
	out := make([]LoadedPolicy, 0, len(s.loaded))
	for _, r := range s.loaded {
		out = append(out, LoadedPolicy{Name: r.Name, Version: r.Version, SHA256: r.SHA256, Registry: r.Registry,
			Active: act[r], InUse: r.refs, LoadedAt: r.LoadedAt})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// Close lets go of every loaded version, closing those no other
// namespace's set holds (waiting for calls in flight up to ctx). Later
// Acquires fail with policies.ErrClosed.
func (s *PolicySet) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	refs := make([]*PolicyRef, 0, len(s.loaded))
	for _, r := range s.loaded {
		refs = append(refs, r)
	}
	s.loaded = map[string]*PolicyRef{}
	s.active = map[string]*resolution{}
	s.mu.Unlock()
	var err error
	for _, r := range refs {
		_, cerr := s.share.release(ctx, r.key, r.Policy)
		err = errors.Join(err, cerr)
	}
	return err
}

// Failed records a failed decision of r (outcome trap, timeout or invalid;
// other outcomes are ignored). After the set's rollback threshold of
// consecutive failures of a pushed version it asks storage to roll the
// version back (once per loaded version). Call it from the coordinator.
func (r *PolicyRef) Failed(ctx context.Context, outcome string, cause error) {
	s := r.set
	if s.rollbackAfter <= 0 || r.Registry == 0 {
		return
	}
	switch outcome {
	case OutcomeTrap, OutcomeTimeout, OutcomeInvalid:
	default:
		return
	}
	n := int(r.fails.Add(1))
	if n < s.rollbackAfter || !r.rolling.CompareAndSwap(false, true) {
		return
	}
	s.autoRollback(ctx, r, n, outcome, cause)
}

// Succeeded records a valid decision of r: the failure count restarts.
func (r *PolicyRef) Succeeded() {
	if r.fails.Load() != 0 {
		r.fails.Store(0)
	}
}

// autoRollback rolls r's version back if it is still active.
func (s *PolicySet) autoRollback(ctx context.Context, r *PolicyRef, n int, outcome string, cause error) {
	_, builtin := plugins.Builtin(r.Name)
	reason := rollbackReason(n, r, outcome, cause)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	res, err := s.st.AutoRollbackPolicy(rctx, r.Name, r.Registry, s.who, reason)
	oc := "not_active"
	switch {
	case err != nil:
		oc = "error"
		r.rolling.Store(false) // try again after the next failures
		r.fails.Store(0)
		s.log.Error("policy auto-rollback failed", "policy", r.Name, "version", r.Registry, "sha", r.Version,
			"reason", reason, "err", err)
	case res.RolledBack:
		oc = "rolled_back"
		to := "the built-in"
		switch {
		case res.Active > 0:
			to = fmt.Sprintf("version %d", res.Active)
		case !builtin:
			to = "no version (held: its groups wait until a version is activated or pushed)"
		}
		s.log.Error("policy auto-rolled back", "policy", r.Name, "from", r.Registry, "sha", r.Version,
			"to", to, "reason", reason)
	default:
		s.log.Warn("policy auto-rollback not needed: the failing version is no longer active", "policy", r.Name,
			"version", r.Registry, "active", res.Active)
	}
	if s.rb != nil {
		s.rb.rollbacks.WithLabelValues(s.rb.ns, r.Name, oc).Inc()
	}
	if err == nil && s.rollbackHook != nil {
		s.rollbackHook(r.Name)
	}
}

// at reports whether the set is at registry generation gen (a Refresh
// read it, and nothing since).
func (s *PolicySet) at(gen int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.genKnown && s.gen == gen
}

// Generation is the registry generation of the last Refresh (0 before).
func (s *PolicySet) Generation() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Preload makes sure name's active version is loaded (compiled and one
// instance started), so the next decision with it pays nothing.
func (s *PolicySet) Preload(ctx context.Context, name string) (*LoadedPolicy, error) {
	ref, err := s.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	defer ref.Release()
	return &LoadedPolicy{Name: ref.Name, Version: ref.Version, SHA256: ref.SHA256, Registry: ref.Registry,
		Active: true, LoadedAt: ref.LoadedAt}, nil
}
