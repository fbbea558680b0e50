// Package keyspace is the one place that builds the Redis key names of a
// namespace. Storage's scripts receive them as KEYS; the host's listeners
// read the channel names; tests use it to look at raw state. It is internal:
// the key schema is not part of wasmsched's public API, and may change
// between releases (docs/architecture.md lists it for operators).
package keyspace
