package storage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/wasmsched/wasmsched/internal/errs"
)

// Sentinel errors (defined once in internal/errs, which the client
// re-exports). Script results map to them in scriptErr; check with
// errors.Is. The wrapped message keeps the detail, e.g.
// "storage: apply: run r12 is RUNNING, want WAITING: bad state".
var (
	ErrFenced        = errs.ErrFenced        // caller is not the current leader (epoch/holder/lock mismatch)
	ErrStale         = errs.ErrStale         // version CAS failed / slot changed since the check
	ErrBadState      = errs.ErrBadState      // run (or worker) not in a state allowing the change
	ErrNoSlots       = errs.ErrNoSlots       // not enough free slots on live workers
	ErrNotOwner      = errs.ErrNotOwner      // wrong worker or assignment token
	ErrDuplicate     = errs.ErrDuplicate     // id / claim / blob already exists
	ErrNotFound      = errs.ErrNotFound      // unknown run, group, policy, version
	ErrNotHolder     = errs.ErrNotHolder     // lock does not hold the caller's stamp
	ErrUnknownWorker = errs.ErrUnknownWorker // worker reaped or never registered
	ErrInvalid       = errs.ErrInvalid       // bad input
	ErrConflict      = errs.ErrConflict      // an idempotency key reused with another request
	// ErrOutOfMemory: Redis refused a write because it is at maxmemory
	// with eviction off (noeviction). Nothing was written (a script is
	// refused before its first write); retry once memory is freed.
	ErrOutOfMemory = errs.ErrOutOfMemory
)

var codes = map[string]error{
	"WS_FENCED":         ErrFenced,
	"WS_STALE":          ErrStale,
	"WS_BAD_STATE":      ErrBadState,
	"WS_NO_SLOTS":       ErrNoSlots,
	"WS_NOT_OWNER":      ErrNotOwner,
	"WS_DUP":            ErrDuplicate,
	"WS_NOT_FOUND":      ErrNotFound,
	"WS_NOT_HOLDER":     ErrNotHolder,
	"WS_UNKNOWN_WORKER": ErrUnknownWorker,
	"WS_INVALID":        ErrInvalid,
	"WS_CONFLICT":       ErrConflict,
}

// scriptErr is the ONE place that maps script error replies
// ("WS_CODE detail") to sentinel errors. Other errors are wrapped as is.
func scriptErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		code, detail, _ := strings.Cut(msg, " ")
		if code == "OOM" {
			return fmt.Errorf("storage: %s: Redis refused the write: it is at its maxmemory with eviction off "+
				"(free memory, raise maxmemory, or shorten group retention); nothing was written: %w", op, ErrOutOfMemory)
		}
		if s, ok := codes[code]; ok {
			if detail == "" {
				return fmt.Errorf("storage: %s: %w", op, s)
			}
			return fmt.Errorf("storage: %s: %s: %w", op, detail, s)
		}
	}
	return fmt.Errorf("storage: %s: %w", op, err)
}

// invalid builds an ErrInvalid error for Go-side validation.
func invalid(op, format string, a ...any) error {
	return fmt.Errorf("storage: %s: %s: %w", op, fmt.Sprintf(format, a...), ErrInvalid)
}
