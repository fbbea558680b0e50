package host

import (
	"context"
	"log/slog"

	"github.com/wasmsched/wasmsched/storage"
)

// compactHint logs, once at a host's start, when the Redis server keeps
// run records in its larger encoding: its hash-max-listpack-value under
// storage.CompactRecordsValue makes every run's hash a hashtable at its
// first launch (about twice the memory a retained run, and more of
// Redis's time a run). A server that does not say (CONFIG refused, the
// embedded store) is left alone.
func compactHint(ctx context.Context, st *storage.Store, log *slog.Logger) {
	n, ok := st.ListpackValue(ctx)
	if !ok || n >= storage.CompactRecordsValue {
		return
	}
	log.Info("Redis keeps run records as hashtables: set hash-max-listpack-value to keep them compact "+
		"(about half the memory a run; docs/operations.md \"Redis\")",
		"hash_max_listpack_value", n, "suggested", storage.CompactRecordsValue)
}
