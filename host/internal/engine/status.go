package engine

import (
	"time"
)

// statsView is the last refresh of the slots and runs gauges.
type statsView struct {
	At                         time.Time
	SlotsFree, SlotsAssigned   int
	Workers, WorkersAlive      int
	Waiting, Launched, Running int // Running = RUNNING + STOPPING
	Restore                    int
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
