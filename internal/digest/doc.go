// Package digest names policy versions: the sha256 of a module's bytes, in
// hex, and its short form (the first ShortLen hex digits) recorded on runs
// and shown by the CLI. One helper for storage, policies, host and cmd.
package digest
