// Package host is the wasmsched runtime: leader election per namespace,
// the leader tasks that run while a host leads (serial coordinator, slot
// manager, restore — added as tasks by later issues), and the admin HTTP
// server.
//
// # Leadership
//
// Every host process has one identity stamp, ADDR#START_UNIX_NANO#RANDOM
// (storage.NewIdentity). It is the value of the namespace's redislock lock key, so a
// process restarted at the same address is a different identity and never
// adopts its predecessor's lease.
//
// One goroutine per namespace (Elector.Run) serialises every leadership
// change: obtain the lock -> storage.BecomeLeader (bumps the fencing epoch
// only if the lock still holds our stamp) -> lead (run the registered
// LeaderTasks concurrently, refresh the lock every TTL/3) -> on loss, stop
// deciding at once (the Lease turns invalid), cancel the tasks, wait for all
// of them -> release the lock -> stand by and compete again (every ~TTL/4,
// jittered). So one process never runs two sets of leader tasks for a
// namespace at once.
//
// A leader task receives a *Lease. It must check Lease.Valid() before every
// apply and pass Lease.Fence() to every leader-authority write; the storage
// scripts reject a stale (epoch, holder) or a lock that no longer holds the
// holder's stamp with storage.ErrFenced. A task returning an error (ErrFenced
// in particular) ends the term at once: the host demotes itself.
//
// Pub/sub: a standby wakes up at once when a leader releases the lock
// (the leader-events channel), and a runtime refreshes its policies when
// one is pushed or activated (the policy channel). Both listen through a
// Bus, which carries every channel of a process over one connection.
//
// The lease is local and conservative: it is valid until the time the last
// successful obtain/refresh was *sent* plus the TTL minus a safety margin,
// and turns invalid at once when loss is detected.
package host
