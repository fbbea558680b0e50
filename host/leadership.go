package host

import (
	"log/slog"

	"github.com/wasmsched/wasmsched/host/internal/leader"
)

// Leadership lives in host/internal/leader (the elector, the lease, the
// pub/sub bus); these names are what a host's users need of it.
type (
	// Lease is a leader term's authority, handed to every leader task: its
	// Fence for fenced writes, Valid until it expires or is lost, Done when
	// the term ends.
	Lease = leader.Lease
	// LeaderTask is work a host does only while it leads a namespace; it
	// runs once per term and must return when ctx ends. Returning
	// storage.ErrFenced (or any error) ends the term.
	LeaderTask = leader.LeaderTask
	// Task is a named LeaderTask.
	Task = leader.Task
	// Bus is one pub/sub connection shared by every namespace of a
	// process (leader releases, policy changes, work events).
	Bus = leader.Bus
	// BusEvent is one message (or subscription notice) of a Bus channel.
	BusEvent = leader.BusEvent
	// Subscriber opens pub/sub connections: a *storage.Store, or the Redis
	// client a multi-namespace host shares.
	Subscriber = leader.Subscriber
)

// NewBus returns a Bus on client; it connects on the first Subscribe.
func NewBus(client Subscriber, log *slog.Logger) *Bus { return leader.NewBus(client, log) }
