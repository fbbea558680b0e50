package host

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/host/internal/engine"
	"github.com/wasmsched/wasmsched/policies"
)

// Engine defaults (zero EngineConfig fields) and bounds.
// DefaultSlotGuard is EngineConfig.SlotGuard's default.
const DefaultSlotGuard = engine.DefaultSlotGuard

// DefaultUnfitTimeout is EngineConfig.UnfitTimeout's default.
const DefaultUnfitTimeout = engine.DefaultUnfitTimeout

// MaxIdleAllocationPasses is how many slot-manager passes in a row an
// allocation policy's order may place nothing while runs fit the free
// slots; the next such order is a policy failure (the pass falls back).
const MaxIdleAllocationPasses = engine.MaxIdleAllocationPasses

const (
	DefaultCoordinators = engine.DefaultCoordinators
	MaxCoordinators     = engine.MaxCoordinators
	// DefaultRetention is how long finished runs are kept when neither the
	// group (group set --retention) nor EngineConfig.Retention says.
	DefaultRetention = engine.DefaultRetention
	// DefaultRollbackAfter is EngineConfig.RollbackAfter's default.
	DefaultRollbackAfter = engine.DefaultRollbackAfter
)

// EngineConfig configures a host's leader engine: the serial coordinator,
// the slot manager, the failover restore, drain, retention and stats, which
// run while the host leads its namespace. Zero fields take defaults.
type EngineConfig struct {
	// Coordinators is how many batches of groups (one pipelined snapshot +
	// apply round trip each; docs/architecture.md) are decided at once
	// (1..256), one while a launched run waits for slots; the failover
	// restore restores max(Coordinators, 8) runs at once. Default 1
	// (RATIONALE.md "Why one coordinator batch at a time by default?").
	Coordinators int
	// PolicyTimeout is the deadline of one policy decide call; default
	// policies.DefaultCallTimeout.
	PolicyTimeout time.Duration
	// PolicyMemory caps each policy instance's memory in bytes (>=
	// policies.MinMemoryLimit); default policies.DefaultMemoryLimit.
	PolicyMemory uint64
	// PolicyPool is the number of instances per policy version; default
	// GOMAXPROCS. In a Multi, a version is loaded once for all namespaces,
	// so this is per version per process.
	PolicyPool int
	// PolicyCacheDir is the wazero compilation cache ("" default dir, "-" none).
	PolicyCacheDir string
	// PolicyMaxModuleSize bounds the size of a policy module this host
	// loads (policies.Config.MaxModuleSize); a pushed version over it is
	// never loaded. 0 = policies.DefaultMaxModuleSize (8 MiB).
	PolicyMaxModuleSize uint64
	// Policies, if set, is a shared wasm runtime used instead of creating
	// one (the Policy* fields are then ignored); Host.Close does not
	// close it.
	Policies *policies.Runtime
	// ReusePolicy is the slot-reuse policy name; default "reuse".
	ReusePolicy string
	// PollInterval is how long the coordinator, the slot manager, the
	// drainer and an idle restore task wait for a wake-up before they look
	// anyway. They are woken by the namespace's work-events (a submit, a
	// finished run, a stop request, group settings, a worker's new slots),
	// by policy activations and by each other, so this is a safety net
	// (a pass that did work is followed at once by the next, and the
	// coordinator looks again a few times within ~2.5 s after work).
	// Default 1m.
	PollInterval time.Duration
	// SlotInterval is how often the slot manager looks again while the
	// oldest LAUNCHED run waits for slots and nothing woke it. Default 1s.
	SlotInterval time.Duration
	// SlotGuard is how long a LAUNCHED run that does not fit in the free
	// slots lets younger runs that fit take slots past it (backfill)
	// before the freed slots are held for it until it fits. Default 30s.
	SlotGuard time.Duration
	// UnfitTimeout is how long a LAUNCHED run may need more slots than
	// every live worker has together before it is failed ("can never
	// fit"). Default 5m.
	UnfitTimeout time.Duration
	// MaxRunSlots, when > 0, is the namespace's bound on a run's slots:
	// the leader records it (storage.Store.SetMaxRunSlots) and submit
	// refuses a run asking more. 0: only limits.MaxRunSlots (1,024).
	MaxRunSlots int
	// RestoreInterval is the period of dead-worker reaping and restore-queue
	// processing while slots are assigned (with none, a PollInterval).
	// Default 500ms.
	RestoreInterval time.Duration
	// Retention is the namespace's default retention of finished runs
	// (a group's own setting wins): default DefaultRetention (7 days);
	// negative keeps them forever.
	Retention time.Duration
	// RetentionInterval is the shortest time between two passes of the
	// retention task (it removes expired runs in fenced chunks of
	// storage.ExpireChunk, visiting the groups the retire index says are
	// due, and sleeps until the next is due). Default 1s.
	RetentionInterval time.Duration
	// StatsInterval is how old the slots/runs gauges may be when they are
	// read: a scrape of /metrics or /status refreshes them (nothing reads
	// Redis for them otherwise). Default 2s; negative disables them.
	StatsInterval time.Duration
	// SeriesInterval is the time between two points of the time series the
	// leader keeps for the web UI's charts (24 h of points; nothing while
	// the namespace is idle). Default storage.SeriesInterval (10s);
	// negative disables it.
	SeriesInterval time.Duration
	// Backoff is the first delay before a group whose policy failed
	// (invalid, trap, timeout, unknown) is decided again; it doubles up to
	// MaxBackoff. Defaults 100ms and 5s.
	Backoff, MaxBackoff time.Duration
	// BatchSize bounds the groups read per coordinator pass and the runs per
	// slot-manager pass. Default 1000.
	BatchSize int
	// RollbackAfter is how many consecutive failed decisions (trap,
	// timeout, invalid) of a pushed policy version make this host roll it
	// back (storage.Store.AutoRollbackPolicy; docs/operations.md). 0 =
	// DefaultRollbackAfter (5); negative disables.
	RollbackAfter int
	// TracerProvider, when set, gets a "wasmsched.decide" span for each
	// run an applied decision launched, discarded or stopped: a child of
	// the run's submit span (a run submitted without a trace context gets
	// none), with the policy's name and version, the decision's reason and
	// wake. The leader reads those runs' trace contexts off the decision
	// path, one pipelined round trip a batch; nil (the default): no spans
	// and nothing read.
	TracerProvider trace.TracerProvider
}

// Validate reports unusable values (zero is always fine).
func (c EngineConfig) Validate() error { return engine.Config(c).Validate() }
