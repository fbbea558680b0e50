package storage

import (
	"context"
	"strconv"
)

// CompactRecordsValue is the hash-max-listpack-value at which a run's
// record stays a listpack, Redis's compact encoding of a small hash: its
// decision record (the claim, the policy's sha256, the reason) and its
// assignment (the worker's identity, the slot, the token) are longer than
// the server's default of 64 bytes, so at the default each run's hash
// becomes a hashtable at its first launch, about twice the memory (1,287
// against 728 bytes a finished run on the 1,000-group bench) and more
// of Redis's time a run (docs/operations.md "Redis").
const CompactRecordsValue = 512

// ListpackValue reads the server's hash-max-listpack-value (CONFIG GET).
// ok is false when the server does not say: CONFIG refused (a managed
// Redis, an ACL user without it) or not served (the embedded store).
func (s *Store) ListpackValue(ctx context.Context) (n int, ok bool) {
	v, err := s.c.ConfigGet(ctx, "hash-max-listpack-value").Result()
	if err != nil {
		return 0, false
	}
	n, err = strconv.Atoi(v["hash-max-listpack-value"])
	return n, err == nil
}
