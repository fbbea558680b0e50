package storage

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// NamespacesKey is the advisory namespace registry: a set of namespace
// names. It is the one key outside every namespace (no hash tag, so on
// Redis Cluster it lives on whichever shard owns its slot). Nothing depends
// on it for correctness: `serve --namespaces all` reads it once at start to
// know which namespaces to compete for. Hosts add the namespaces they serve
// (Store.Register); operators may add one with `SADD ws:namespaces NS`.
const NamespacesKey = "ws:namespaces"

// HostsKey is the advisory host-presence set used by the multi-namespace
// balancer: a sorted set of host identity -> presence expiry (unix ms).
// Like NamespacesKey it lives outside every namespace.
const HostsKey = "ws:hosts"

// register adds the store's namespace to the namespace registry.
func (s *Store) register(ctx context.Context) error {
	return RegisterNamespaces(ctx, s.c, s.ns)
}

// RegisterNamespaces validates names and adds them to the namespace registry.
func RegisterNamespaces(ctx context.Context, c redis.UniversalClient, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	members := make([]any, 0, len(names))
	for _, n := range names {
		if err := limits.ValidateName("namespace", n); err != nil {
			return err
		}
		members = append(members, n)
	}
	if err := c.SAdd(ctx, NamespacesKey, members...).Err(); err != nil {
		return fmt.Errorf("storage: register namespaces: %w", err)
	}
	return nil
}

// ListNamespaces returns the registered namespaces, sorted (names that no
// longer validate are skipped).
func ListNamespaces(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	ms, err := c.SMembers(ctx, NamespacesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("storage: list namespaces: %w", err)
	}
	out := ms[:0]
	for _, n := range ms {
		if limits.ValidateName("namespace", n) == nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Exists reports whether the namespace has been used: a group, a run, a
// leader or a policy was ever written in it (one EXISTS of those keys).
// A namespace that was only registered (NamespacesKey) does not count.
func (s *Store) Exists(ctx context.Context) (bool, error) {
	k := s.k
	n, err := s.c.Exists(ctx, k.Seq(), k.Groups(), k.Fence(), k.Policies(), k.Workers()).Result()
	if err != nil {
		return false, fmt.Errorf("storage: namespace %s: %w", s.ns, err)
	}
	return n > 0, nil
}

// Namespaces is ListNamespaces on the store's connection.
func (s *Store) Namespaces(ctx context.Context) ([]string, error) { return ListNamespaces(ctx, s.c) }

// Sibling opens namespace ns on the store's connection (no new
// connection; ns is validated).
func (s *Store) Sibling(ns string) (*Store, error) { return New(s.given, ns) }
