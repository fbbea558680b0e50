// Package abitest builds ABI records tersely for tests, natively: runs in a
// given state, snapshots and reuse requests.
package abitest

import "github.com/wasmsched/wasmsched/abi"

// Waiting returns a WAITING run with the given id and seq.
func Waiting(id string, seq uint64) abi.Run {
	return abi.Run{ID: id, Seq: seq, State: abi.StateWaiting, Slots: 1, SubmittedAt: int64(1_000 + seq)}
}

// Running returns a RUNNING run.
func Running(id string, seq uint64) abi.Run {
	r := Waiting(id, seq)
	r.State, r.StartedAt = abi.StateRunning, int64(2_000+seq)
	return r
}

// Launched returns a LAUNCHED run.
func Launched(id string, seq uint64) abi.Run {
	r := Waiting(id, seq)
	r.State = abi.StateLaunched
	return r
}

// Stopping returns a STOPPING run.
func Stopping(id string, seq uint64) abi.Run {
	r := Running(id, seq)
	r.State = abi.StateStopping
	return r
}

// Snapshot returns a serial snapshot of group "g" with the given runs.
func Snapshot(policy string, maxActive uint32, active, waiting []abi.Run) *abi.SerialSnapshot {
	return &abi.SerialSnapshot{Group: "g", Policy: policy, MaxActive: maxActive, Now: 10_000, Active: active, Waiting: waiting}
}

// Window marks s's Waiting as the window of a group with total WAITING runs
// whose first oldest entries are the group's oldest (ABI v2).
func Window(s *abi.SerialSnapshot, total, oldest uint32) *abi.SerialSnapshot {
	s.WaitingTotal, s.WaitingOldest = total, oldest
	return s
}

// Slot returns a task slot; alive and held are what the host verified.
func Slot(task uint32, worker string, alive, held bool) abi.TaskSlot {
	return abi.TaskSlot{Task: task, Worker: worker, Index: task, Token: "tok-" + worker, Alive: alive, Held: held}
}

// Reuse returns a reuse request for a RUNNING run "run" with the given slots.
func Reuse(slots ...abi.TaskSlot) *abi.ReuseRequest {
	run := Running("run", 1)
	run.Slots = uint32(len(slots))
	return &abi.ReuseRequest{Group: "g", Now: 10_000, Run: run, Slots: slots}
}
