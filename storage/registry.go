package storage

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// PolicyVersion is one pushed version of a policy (content-addressed).
type PolicyVersion struct {
	Version  int // 1, 2, ... in push order
	SHA256   string
	PushedAt time.Time
	Who      string
	Note     string
	Deleted  bool // DeletePolicy emptied it: its number stays, its blob may be gone
}

// PolicyEvent is one history entry: Action is "push", "activate",
// "rollback", "auto-rollback" or "delete".
type PolicyEvent struct {
	At      time.Time
	Who     string
	Action  string
	Version int
	Note    string
}

// Policy is a named policy in the registry.
type Policy struct {
	Name     string
	Kind     string // e.g. "serial" or "slot-reuse" (checked for consistency only)
	Active   int    // active version; 0 = the built-in
	Versions []PolicyVersion
	History  []PolicyEvent
	// AutoRollback is the last automatic rollback (nil if none), read in
	// the same transaction as Active, so the two always agree.
	AutoRollback *AutoRollbackInfo
}

// PushRequest pushes a policy blob.
type PushRequest struct {
	Name, Kind, Who, Note string
	Blob                  []byte
	Activate              bool
}

const us = "\x1f" // field separator of version and history entries

func validateText(op, what, s string) error {
	if strings.Contains(s, us) {
		return invalid(op, "%s contains the unit separator (0x1f)", what)
	}
	return nil
}

var dupVersion = regexp.MustCompile(`version (\d+) of policy`)

// PushPolicy stores req.Blob by sha256 and appends a version. The same sha
// as an existing version of the name is ErrDuplicate, returned with that
// version. A kind differing from the name's existing kind is ErrInvalid.
// With Activate, the version becomes active (see ActivatePolicy).
func (s *Store) PushPolicy(ctx context.Context, req PushRequest) (PolicyVersion, error) {
	const op = "push policy"
	if err := limits.ValidateName("policy", req.Name); err != nil {
		return PolicyVersion{}, err
	}
	if err := limits.ValidateName("policy kind", req.Kind); err != nil {
		return PolicyVersion{}, err
	}
	if len(req.Blob) == 0 {
		return PolicyVersion{}, invalid(op, "policy %s: empty blob", req.Name)
	}
	for _, x := range [][2]string{{"who", req.Who}, {"note", req.Note}} {
		if err := validateText(op, x[0], x[1]); err != nil {
			return PolicyVersion{}, err
		}
	}
	sha := digest.SHA256(req.Blob)
	k := s.k
	act := "0"
	if req.Activate {
		act = "1"
	}
	v, err := s.run(ctx, op, "push_policy",
		[]string{k.Policies(), k.Policy(req.Name), k.PolicyVersions(req.Name), k.PolicyHistory(req.Name),
			k.PolicyActivations(req.Name), k.Blob(sha), k.PolicyGen(), k.Dirty(), k.Groups()},
		req.Name, req.Kind, sha, req.Blob, req.Who, req.Note, act, k.PolicyChannel())
	if errors.Is(err, ErrDuplicate) {
		if m := dupVersion.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			if p, gerr := s.GetPolicy(ctx, req.Name); gerr == nil && n <= len(p.Versions) {
				return p.Versions[n-1], err
			}
		}
		return PolicyVersion{}, err
	}
	if err != nil {
		return PolicyVersion{}, err
	}
	a := v.([]any)
	return PolicyVersion{Version: int(toInt64(a[0])), SHA256: sha, PushedAt: msTime(toInt64(a[1])), Who: req.Who, Note: req.Note}, nil
}

// GetPolicy reads a policy with its versions and history (ErrNotFound).
func (s *Store) GetPolicy(ctx context.Context, name string) (Policy, error) {
	if err := limits.ValidateName("policy", name); err != nil {
		return Policy{}, err
	}
	ps, err := s.getPolicies(ctx, []string{name})
	if err != nil {
		return Policy{}, err
	}
	if len(ps) == 0 {
		return Policy{}, fmt.Errorf("storage: get policy: policy %s: %w", name, ErrNotFound)
	}
	return ps[0], nil
}

// ListPolicies lists all policies by name.
func (s *Store) ListPolicies(ctx context.Context) ([]Policy, error) {
	names, err := s.c.SMembers(ctx, s.k.Policies()).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: list policies: %w", err)
	}
	sort.Strings(names)
	return s.getPolicies(ctx, names)
}

func (s *Store) getPolicies(ctx context.Context, names []string) ([]Policy, error) {
	type cmds struct {
		h     *redis.SliceCmd
		v, hi *redis.StringSliceCmd
	}
	cs := make([]cmds, len(names))
	// MULTI: one consistent view of each policy's hash, versions and
	// history (all keys of the namespace share a hash slot).
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cs[i] = cmds{p.HMGet(ctx, s.k.Policy(n), append([]string{"kind", "active"}, autoRollbackFields...)...),
				p.LRange(ctx, s.k.PolicyVersions(n), 0, -1), p.LRange(ctx, s.k.PolicyHistory(n), 0, -1)}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("storage: read policies: %w", err)
	}
	var out []Policy
	for i, n := range names {
		h := cs[i].h.Val()
		if h[0] == nil {
			continue
		}
		p := Policy{Name: n, Kind: str(h[0]), Active: int(toInt64(h[1])), AutoRollback: parseAutoRollback(h[2:])}
		for j, e := range cs[i].v.Val() {
			f := strings.SplitN(e, us, 4)
			for len(f) < 4 {
				f = append(f, "")
			}
			at, _ := strconv.ParseInt(f[1], 10, 64)
			p.Versions = append(p.Versions, PolicyVersion{Version: j + 1, SHA256: f[0], PushedAt: msTime(at), Who: f[2], Note: f[3],
				Deleted: f[0] == ""})
		}
		for _, e := range cs[i].hi.Val() {
			f := strings.SplitN(e, us, 5)
			for len(f) < 5 {
				f = append(f, "")
			}
			at, _ := strconv.ParseInt(f[0], 10, 64)
			ver, _ := strconv.Atoi(f[3])
			p.History = append(p.History, PolicyEvent{At: msTime(at), Who: f[1], Action: f[2], Version: ver, Note: f[4]})
		}
		out = append(out, p)
	}
	return out, nil
}

// PolicyBlob returns the blob with the given sha256 hex (ErrNotFound).
func (s *Store) PolicyBlob(ctx context.Context, sha string) ([]byte, error) {
	if err := limits.ValidateName("sha256", sha); err != nil {
		return nil, err
	}
	b, err := s.c.Get(ctx, s.k.Blob(sha)).Bytes()
	if err == redis.Nil {
		return nil, fmt.Errorf("storage: policy blob %s: %w", sha, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: policy blob %s: %w", sha, err)
	}
	return b, nil
}

func (s *Store) activate(ctx context.Context, op, name, version, who, note string) (int, error) {
	if err := limits.ValidateName("policy", name); err != nil {
		return 0, err
	}
	for _, x := range [][2]string{{"who", who}, {"note", note}} {
		if err := validateText(op, x[0], x[1]); err != nil {
			return 0, err
		}
	}
	k := s.k
	v, err := s.run(ctx, op, "activate_policy",
		[]string{k.Policy(name), k.PolicyVersions(name), k.PolicyHistory(name), k.PolicyActivations(name), k.PolicyGen(),
			k.Dirty(), k.Groups()},
		name, version, who, note, k.PolicyChannel(), newID("op-"))
	if err != nil {
		return 0, err
	}
	return int(toInt64(v)), nil
}

// ActivatePolicy makes version active: bumps the policy generation, appends
// history and PUBLISHes "name version gen" on keyspace.Keys.PolicyChannel().
// Version 0 is none: the embedded built-in of a built-in name, no active
// version for any other (its groups hold; the policy may then be deleted).
// Activating the active version is a no-op. ErrNotFound for an unknown
// policy or version.
func (s *Store) ActivatePolicy(ctx context.Context, name string, version int, who, note string) error {
	if version < 0 {
		return invalid("activate policy", "policy %s: version %d, want >= 0 (0: none, the built-in of a built-in name)", name, version)
	}
	_, err := s.activate(ctx, "activate policy", name, strconv.Itoa(version), who, note)
	return err
}

// RollbackPolicy re-activates the version that was active before the
// current one (activations form a stack: rolling back twice goes two steps
// back; a version active twice in a row counts once). Past the first
// activation it goes to version 0 (the built-in of a built-in name, none
// for another), as an automatic rollback does. ErrBadState when version 0
// is active already.
func (s *Store) RollbackPolicy(ctx context.Context, name, who, note string) (PolicyVersion, error) {
	v, err := s.activate(ctx, "rollback policy", name, "", who, note)
	if err != nil {
		return PolicyVersion{}, err
	}
	p, err := s.GetPolicy(ctx, name)
	if err != nil {
		return PolicyVersion{}, err
	}
	if v < 1 || v > len(p.Versions) {
		return PolicyVersion{Version: v}, nil
	}
	return p.Versions[v-1], nil
}

// PolicyGeneration is bumped on every activation; hosts compare it each pass.
func (s *Store) PolicyGeneration(ctx context.Context) (int64, error) {
	n, err := s.c.Get(ctx, s.k.PolicyGen()).Int64()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("storage: policy generation: %w", err)
	}
	return n, nil
}

// DeletePolicy deletes version (>= 1) of policy name, or with version 0
// the whole policy. A version that is active cannot be deleted, nor a
// policy with an active version (ErrBadState); a deleted version keeps its
// number, leaves the activations stack (rollback skips it) and cannot be
// activated. A blob is deleted only when no version of any policy still
// names it. It returns how many blobs it deleted. ErrNotFound for an
// unknown policy or version (also one already deleted).
func (s *Store) DeletePolicy(ctx context.Context, name string, version int, who, note string) (int, error) {
	const op = "delete policy"
	if err := limits.ValidateName("policy", name); err != nil {
		return 0, err
	}
	if version < 0 {
		return 0, invalid(op, "policy %s: version %d, want >= 1 (or 0: the whole policy)", name, version)
	}
	for _, x := range [][2]string{{"who", who}, {"note", note}} {
		if err := validateText(op, x[0], x[1]); err != nil {
			return 0, err
		}
	}
	for attempt := 0; ; attempt++ {
		ps, err := s.ListPolicies(ctx)
		if err != nil {
			return 0, err
		}
		var self *Policy
		var others []string
		for i := range ps {
			if ps[i].Name == name {
				self = &ps[i]
			} else {
				others = append(others, s.k.PolicyVersions(ps[i].Name))
			}
		}
		if self == nil {
			return 0, fmt.Errorf("storage: %s: policy %s: %w", op, name, ErrNotFound)
		}
		k := s.k
		keys := []string{k.Policies(), k.Policy(name), k.PolicyVersions(name), k.PolicyHistory(name),
			k.PolicyActivations(name), k.PolicyGen()}
		ver := ""
		if version > 0 {
			ver = strconv.Itoa(version)
			sha := ""
			if version <= len(self.Versions) {
				sha = self.Versions[version-1].SHA256
			}
			keys = append(keys, k.Blob(sha))
		} else {
			for _, v := range self.Versions {
				keys = append(keys, k.Blob(v.SHA256))
			}
		}
		nb := len(keys) - 6
		keys = append(keys, others...)
		v, err := s.run(ctx, op, "delete_policy", keys, name, ver, who, note, nb)
		if errors.Is(err, ErrBadState) && strings.Contains(err.Error(), "registry changed") && attempt < 3 {
			continue
		}
		if err != nil {
			return 0, err
		}
		return int(toInt64(v)), nil
	}
}
