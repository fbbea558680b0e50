package limits

import "time"

// Groups.
const (
	// DefaultWindow is the number of oldest and of newest WAITING runs a
	// snapshot holds when a group has more than twice as many (each part
	// is at least max_active); Group.Window overrides it per group.
	DefaultWindow = 16
	// MaxWindow bounds Group.Window and MaxMaxActive bounds max_active, so
	// that a snapshot holds at most 2·MaxWindow waiting runs.
	MaxWindow    = 10_000
	MaxMaxActive = 10_000
)

// Runs.
const (
	// MaxRunSlots bounds the task slots one run may ask for: a run that
	// asks more is refused at submit (ErrInvalid), never launched to wait
	// for slots no namespace of workers this engine is built for has
	// together.
	MaxRunSlots = 1024
	// MaxPayload bounds a run's payload: it is handed to the worker as is
	// (pass a reference, not the data).
	MaxPayload = 64 << 10
	// MaxIdempotencyKey bounds a submit's idempotency key.
	MaxIdempotencyKey = 256
	// MaxResult and MaxOutput bound what a report stores on a run: a
	// handler's result, the tail of a program's output.
	MaxResult = 64 << 10
	MaxOutput = 4 << 10
	// MaxProgressMessage bounds a run's progress message (storage.SetProgress).
	MaxProgressMessage = 256
	// MaxLostReports bounds the lost-run reports a namespace keeps.
	MaxLostReports = 1000
	// MaxScheduleName bounds a schedule's name (its runs' ids carry it).
	MaxScheduleName = 96
	// MaxWorkerGroups bounds the groups (names or patterns) a worker
	// serves; its labels are bounded as a run's (abi.MaxLabels).
	MaxWorkerGroups = 64
)

// Bounds and defaults of runs in time.
const (
	MaxNotBefore     = 366 * 24 * time.Hour
	MaxTimeout       = 30 * 24 * time.Hour
	MaxAttempts      = 100
	DefaultRetryBase = time.Second
	DefaultRetryCap  = 10 * time.Minute
	MaxRetryCap      = 7 * 24 * time.Hour
)

// Allocation.
const (
	// DefaultAllocation is the allocation policy of a namespace that set
	// none: launch order, with backfill and the slot guard.
	DefaultAllocation = "fifo"
	// MaxAllocWindow bounds the window k of an allocation snapshot: the
	// oldest k and the newest k launched runs.
	MaxAllocWindow = 500
)
