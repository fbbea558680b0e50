// Package storage keeps wasmsched's state in Redis: the key schema (keys.go),
// the Lua scripts that are the only writers (scripts/*.lua, embedded), and a
// typed Go API over them. Script error codes map to the sentinel errors in
// errors.go (check with errors.Is). Leader-authority scripts are fenced by
// (epoch, holder, live lock). See README.md for the key schema, the scripts
// and their codes, and idempotency under go-redis retries.
package storage
