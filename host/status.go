package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// statsView is the last refresh of the slots and runs gauges.
type statsView struct {
	At                         time.Time
	SlotsFree, SlotsAssigned   int
	Workers, WorkersAlive      int
	Waiting, Launched, Running int // Running = RUNNING + STOPPING
	Restore                    int
}

// refreshStats reads the slot table, the groups' queue lengths, the
// LAUNCHED queue and the restore set (a few pipelined reads) and sets the
// gauges.
func (r *Engine) refreshStats(ctx context.Context) error {
	sv, err := r.st.Slots(ctx)
	if err != nil {
		return err
	}
	groups, err := r.st.ListGroups(ctx)
	if err != nil {
		return err
	}
	q, err := r.st.Queues(ctx)
	if err != nil {
		return fmt.Errorf("host: stats: %w", err)
	}
	v := &statsView{At: time.Now(), SlotsFree: sv.Free, SlotsAssigned: sv.Assigned, Workers: len(sv.Workers),
		Launched: q.Launched, Restore: q.Restore}
	for _, w := range sv.Workers {
		if w.Alive {
			v.WorkersAlive++
		}
	}
	active := 0
	for _, g := range groups {
		v.Waiting += g.Waiting
		active += g.Active
	}
	v.Running = max(active-v.Launched, 0)
	r.stats.Store(v)
	ns := r.m.ns
	r.m.slots.WithLabelValues(ns, "free").Set(float64(v.SlotsFree))
	r.m.slots.WithLabelValues(ns, "assigned").Set(float64(v.SlotsAssigned))
	r.m.runs.WithLabelValues(ns, string(storage.StateWaiting)).Set(float64(v.Waiting))
	r.m.runs.WithLabelValues(ns, string(storage.StateLaunched)).Set(float64(v.Launched))
	r.m.runs.WithLabelValues(ns, string(storage.StateRunning)).Set(float64(v.Running))
	r.m.runs.WithLabelValues(ns, "RESTORE").Set(float64(v.Restore))
	return nil
}

// runStats is the stats LeaderTask: refresh every StatsInterval; the gauges
// are removed when the term ends (a standby exports none).
func (r *Engine) runStats(ctx context.Context, lease *Lease) error {
	defer func() {
		r.m.slots.Reset()
		r.m.runs.Reset()
	}()
	for {
		if lease.Valid() {
			if err := r.refreshStats(ctx); err != nil && ctx.Err() == nil {
				r.log.Debug("stats refresh failed", "err", err)
			}
		}
		if !sleepCtx(ctx, r.cfg.StatsInterval) {
			return nil
		}
	}
}

// Status is the JSON of the admin server's /status.
type Status struct {
	Namespace string         `json:"namespace"`
	Identity  string         `json:"identity"`
	Leading   bool           `json:"leading"`
	Epoch     int64          `json:"epoch"` // this host's term, 0 while standing by
	Ready     bool           `json:"ready"`
	Runtime   *RuntimeStatus `json:"runtime,omitempty"` // absent without NewEngine
}

// RuntimeStatus is the runtime section of /status.
type RuntimeStatus struct {
	Coordinators    int              `json:"coordinators"`
	Policies        []LoadedPolicy   `json:"policies"`
	Counters        map[string]int64 `json:"counters"`
	LastPass        *time.Time       `json:"last_pass,omitempty"` // coordinator
	LastSlotPass    *time.Time       `json:"last_slot_pass,omitempty"`
	LastRestorePass *time.Time       `json:"last_restore_pass,omitempty"`
	RestorePending  int              `json:"restore_pending"`
	Stats           *StatsStatus     `json:"stats,omitempty"` // last refresh while leading
}

// StatsStatus is the last stats refresh.
type StatsStatus struct {
	At            time.Time `json:"at"`
	SlotsFree     int       `json:"slots_free"`
	SlotsAssigned int       `json:"slots_assigned"`
	Workers       int       `json:"workers"`
	WorkersAlive  int       `json:"workers_alive"`
	Waiting       int       `json:"waiting"`
	Launched      int       `json:"launched"`
	Running       int       `json:"running"` // RUNNING + STOPPING
	RestoreQueue  int       `json:"restore_queue"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Status returns this host's view (what /status serves).
func (h *Host) Status() Status {
	st := Status{Namespace: h.ns, Identity: h.cfg.Identity, Ready: h.Ready()}
	if l := h.elector.Lease(); l != nil && l.Valid() {
		st.Leading, st.Epoch = true, l.Epoch()
	}
	if r := h.rt.Load(); r != nil {
		st.Runtime = r.Status()
	}
	return st
}

// Status returns the runtime section of /status.
func (r *Engine) Status() *RuntimeStatus {
	rs := &RuntimeStatus{
		Coordinators:    r.cfg.Coordinators,
		Policies:        r.set.Loaded(),
		Counters:        r.Counts(),
		LastPass:        timePtr(r.coord.LastPass()),
		LastSlotPass:    timePtr(r.slots.LastPass()),
		LastRestorePass: timePtr(r.restore.LastPass()),
		RestorePending:  r.restore.Pending(),
	}
	if v := r.stats.Load(); v != nil {
		rs.Stats = &StatsStatus{At: v.At, SlotsFree: v.SlotsFree, SlotsAssigned: v.SlotsAssigned, Workers: v.Workers,
			WorkersAlive: v.WorkersAlive, Waiting: v.Waiting, Launched: v.Launched, Running: v.Running, RestoreQueue: v.Restore}
	}
	return rs
}

// handleStatus serves /status (JSON).
func (h *Host) handleStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(h.Status())
}
