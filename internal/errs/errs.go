package errs

import "errors"

// The sentinels. Their texts end the messages of wrapped errors
// ("storage: apply: run r12 is RUNNING, want WAITING: bad state").
var (
	ErrFenced        = errors.New("fenced")
	ErrStale         = errors.New("stale")
	ErrBadState      = errors.New("bad state")
	ErrNoSlots       = errors.New("no free slots")
	ErrNotOwner      = errors.New("not owner")
	ErrDuplicate     = errors.New("duplicate")
	ErrNotFound      = errors.New("not found")
	ErrNotHolder     = errors.New("not lock holder")
	ErrUnknownWorker = errors.New("unknown worker")
	ErrInvalid       = errors.New("invalid")
	ErrConflict      = errors.New("conflict")
	ErrOutOfMemory   = errors.New("redis out of memory")
	ErrNotReplicated = errors.New("not replicated")
)
