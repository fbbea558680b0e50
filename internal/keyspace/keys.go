package keyspace

// Keys builds every Redis key of one namespace. All keys share the hash tag
// {NS}, so every script touches one cluster slot. No other file (and no Lua
// script) builds key names.
type Keys struct {
	ns string
	p  string // "ws:{NS}:"
}

// New returns the key builder of namespace ns (not validated; use New).
func New(ns string) Keys { return Keys{ns: ns, p: "ws:{" + ns + "}:"} }

// Prefix is "ws:{NS}:", the prefix of every key of the namespace.
func (k Keys) Prefix() string { return k.p }

// Fence is the fence hash: epoch, holder, since (ms).
func (k Keys) Fence() string { return k.p + "fence" }

// Lock is the leader lock key the host passes to redislock; value = holder stamp.
func (k Keys) Lock() string { return k.p + "leader" }

// LeaderTick is the hash of the leader's last tick: holder, epoch, at, count.
func (k Keys) LeaderTick() string { return k.p + "leader:tick" }

// LeaderEvents is the pub/sub channel a leader publishes on after releasing
// the lock, so standbys compete at once instead of at their next retry.
func (k Keys) LeaderEvents() string { return k.p + "leader-events" }

// Seq is the namespace-wide run counter.
func (k Keys) Seq() string { return k.p + "seq" }

// Tokens is the counter slot-assignment tokens are drawn from.
func (k Keys) Tokens() string { return k.p + "tokens" }

// GroupGen is the counter a new group's incarnation (its "gen") is drawn
// from, so the decisions of a group deleted and made again never share an
// id with the old one's.
func (k Keys) GroupGen() string { return k.p + "groupgen" }

// Groups is the set of group names.
func (k Keys) Groups() string { return k.p + "groups" }

// Group is the hash of group g: policy, max_active, version, last_claim.
func (k Keys) Group(g string) string { return k.p + "group:" + g }

// Waiting is the zset of WAITING run ids of group g, by seq.
func (k Keys) Waiting(g string) string { return k.p + "group:" + g + ":waiting" }

// WaitInfo is the hash of group g's WAITING runs: run id -> what a
// decision reads of it, "seq,priority,slots,submitted_ms" (immutable while
// it waits): the snapshot reads a window of the waiting runs with one
// HMGET instead of one per run. Every script that adds to Waiting sets the
// entry, every script that removes from it deletes the entry.
func (k Keys) WaitInfo(g string) string { return k.p + "group:" + g + ":winfo" }

// Delayed is the zset of group g's WAITING runs that are not due yet (a
// not_before ahead, or a retry's backoff), by when they are due (ms). They
// are in no snapshot; the leader moves the due ones into Waiting
// (due.lua), and Timers holds the group's earliest.
func (k Keys) Delayed(g string) string { return k.p + "group:" + g + ":delayed" }

// Timers is the zset of groups -> when (ms) the leader must look at the
// group again: its earliest Delayed run. One entry per group, whatever its
// depth; it lives in Redis, so a new leader fires what a deposed one did not.
func (k Keys) Timers() string { return k.p + "timers" }

// Schedules is the zset of cron schedule names -> their next tick (ms);
// a paused schedule is not in it.
func (k Keys) Schedules() string { return k.p + "schedules" }

// ScheduleNames is the set of every schedule's name, paused or not.
func (k Keys) ScheduleNames() string { return k.p + "schedule-names" }

// Schedule is the hash of schedule name: its spec and its last tick.
func (k Keys) Schedule(name string) string { return k.p + "schedule:" + name }

// Retire is the zset of groups with finished runs -> when (ms) the oldest
// may be due for removal (0: look now): the retention task's index, so it
// visits only the groups that have something due (expire.lua rescores).
func (k Keys) Retire() string { return k.p + "retire" }

// Active is the zset of LAUNCHED/RUNNING/STOPPING run ids of group g, by seq.
func (k Keys) Active(g string) string { return k.p + "group:" + g + ":active" }

// Dirty is the set of groups that may need a decision.
func (k Keys) Dirty() string { return k.p + "dirty" }

// Finished is the zset of group g's finished runs by finished_at (ms): the
// retention index (every script that ends a run adds it; expire.lua
// removes it with the run).
func (k Keys) Finished(g string) string { return k.p + "group:" + g + ":finished" }

// Launches is the list of group g's latest launches, newest first, each
// "launched_ms,labels" (apply.lua LPUSHes one per launch and trims it to
// abi.MaxLaunches; a v4 snapshot carries them, snapshot.lua).
func (k Keys) Launches(g string) string { return k.p + "group:" + g + ":launches" }

// Series is the namespace's time series, oldest first: one point per
// SeriesInterval while anything happens ("at_ms,launches,finishes,
// waiting,active,slots_used,slots_total"), the newest SeriesPoints kept
// (series.lua).
func (k Keys) Series() string { return k.p + "series" }

// GroupSeries is group g's time series, as Series ("at_ms,launches,
// finishes,waiting,active,wait_p50_ms,wait_p95_ms"); it expires a
// SeriesLifetime after its last point.
func (k Keys) GroupSeries(g string) string { return k.p + "group:" + g + ":series" }

// Decisions is the list of group g's latest decisions, newest first
// (apply.lua LPUSHes and trims it to DecisionsKept).
func (k Keys) Decisions(g string) string { return k.p + "group:" + g + ":decisions" }

// Drain is the set of groups whose discard_below still covers WAITING runs
// (apply adds, drain.lua removes).
func (k Keys) Drain() string { return k.p + "drain" }

// Run is the hash of run id.
func (k Keys) Run(id string) string { return k.p + "run:" + id }

// RunPrefix is the prefix of run hashes (passed to the read-only snapshot
// script; see RATIONALE.md "Why do snapshot reads run hashes by prefix?").
func (k Keys) RunPrefix() string { return k.p + "run:" }

// Runs is the zset of all run ids by seq.
func (k Keys) Runs() string { return k.p + "runs" }

// Launched is the zset of LAUNCHED runs waiting for slots, by seq.
func (k Keys) Launched() string { return k.p + "launched" }

// LaunchInfo is the hash of the LAUNCHED runs waiting for slots: run id ->
// what an allocation policy reads of it, "seq,slots,priority,launched_ms,
// group,labels" (immutable while it waits): the slot manager reads the
// runs it has not seen with one HMGET instead of one per run. Every script
// that adds to Launched sets the entry, every script that removes from it
// deletes the entry.
func (k Keys) LaunchInfo() string { return k.p + "linfo" }

// AllocStop is the stop mark of the slot manager's pipelined allocation
// pass: the pass id of the last pass whose call stopped (a held run, no
// free slot left; allocate_batch.lua), so the pass's later calls place
// nothing. A string with a 60 s expiry.
func (k Keys) AllocStop() string { return k.p + "allocstop" }

// Restore is the set of runs whose slots must go through the reuse decision.
func (k Keys) Restore() string { return k.p + "restore" }

// Settings is the namespace's settings hash, written by the leader
// (max_run_slots: serve --max-run-slots).
func (k Keys) Settings() string { return k.p + "settings" }

// Lost is the list of reports of runs the store no longer has (the newest
// first, at most MaxLostReports): executed by a worker, then lost by Redis.
func (k Keys) Lost() string { return k.p + "lost" }

// Workers is the zset worker identity -> heartbeat expiry (ms).
func (k Keys) Workers() string { return k.p + "workers" }

// Worker is the hash of worker id: slots, registered_at.
func (k Keys) Worker(id string) string { return k.p + "worker:" + id }

// Slots is the hash "worker#index" -> "run#token#task" or "" (free).
func (k Keys) Slots() string { return k.p + "slots" }

// Draining is the set of worker identities that take no new runs (a
// graceful shutdown): their slots leave Free and are not offered again
// when freed (release_slots derives this key from Free's prefix).
func (k Keys) Draining() string { return k.p + "draining" }

// Placement is the hash of worker identity -> its placement profile,
// "labels 0x1e groups", for the workers that registered labels or groups;
// the scripts derive it from Free's prefix (_lib.lua "Placement").
func (k Keys) Placement() string { return k.p + "placement" }

// Free is the zset of free "worker#index": score 0 for a worker without a
// placement profile, 1 for one with (a run with requirements reads only
// those).
func (k Keys) Free() string { return k.p + "free" }

// SlotEvents is worker identity's pub/sub channel: the scripts that
// assign or stop a run (apply, allocate_batch, request_stop) publish there
// space-separated "worker#index#run" of the task-0 slots of identity they
// just assigned or asked to stop (ParseSlotEvents), one message a worker a
// call. A channel per worker: a message reaches the worker it names and no
// other, so what an assignment costs Redis does not grow with the number
// of workers (RATIONALE "Why a slot-events channel per worker?").
func (k Keys) SlotEvents(identity string) string { return k.SlotEventsPrefix() + identity }

// SlotEventsPrefix is what the scripts append a worker identity to for its
// SlotEvents channel.
func (k Keys) SlotEventsPrefix() string { return k.p + "slot-events:" }

// SharedSlotEvents is the one slot-events channel of every worker that
// hosts before the per-worker channels published on (the same messages,
// each worker taking the entries naming it). Workers still listen there,
// so they can be upgraded before the hosts; nothing publishes on it now.
func (k Keys) SharedSlotEvents() string { return k.p + "slot-events" }

// WorkEvents is the pub/sub channel on which submit and report announce
// that a group has work (payload: the group; TimerEvent when only the
// timers changed: a delayed run or a retry), so the leader's coordinator
// wakes at once instead of at its next poll. Advisory: the dirty set is
// the truth, and the coordinator still polls it.
func (k Keys) WorkEvents() string { return k.p + "work-events" }

// Idempotency is the key that names the run submitted with an
// idempotency key (its SHA-256, hex), for IdempotencyTTL.
func (k Keys) Idempotency(keySHA string) string { return k.p + "idem:" + keySHA }

// RunEvents is the pub/sub channel on which every script that changes a
// run's state announces it: space-separated "STATE#group#id"
// (ParseRunEvents). Advisory: a watcher that misses a message (it was not
// subscribed, its connection dropped) re-reads the runs.
func (k Keys) RunEvents() string { return k.p + "run-events" }

// Policies is the set of policy names.
func (k Keys) Policies() string { return k.p + "policies" }

// Policy is the hash of policy name: kind, active, last_op.
func (k Keys) Policy(name string) string { return k.p + "policy:" + name }

// PolicyVersions is the list of versions of a policy ("sha|pushed_at|who|note").
func (k Keys) PolicyVersions(name string) string { return k.p + "policy:" + name + ":versions" }

// PolicyHistory is the list of events of a policy ("at|who|action|version|note").
func (k Keys) PolicyHistory(name string) string { return k.p + "policy:" + name + ":history" }

// PolicyActivations is the stack of activated versions (rollback pops it).
func (k Keys) PolicyActivations(name string) string {
	return k.p + "policy:" + name + ":activations"
}

// Blob is the policy wasm blob with sha256 hex sha.
func (k Keys) Blob(sha string) string { return k.p + "blob:" + sha }

// PolicyGen is the registry generation counter (bumped on every activation).
func (k Keys) PolicyGen() string { return k.p + "policygen" }

// PolicyChannel is the pub/sub channel activations are published on.
func (k Keys) PolicyChannel() string { return k.p + "policy-events" }

// Of returns the key builder of a store's namespace (anything with a
// Namespace method: a *storage.Store, a client).
func Of(s interface{ Namespace() string }) Keys { return New(s.Namespace()) }
