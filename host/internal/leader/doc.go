// Package leader is a host's leadership: the Elector (obtain the
// namespace's redislock lock, become leader with a fencing epoch, run the
// leader tasks, refresh, demote, release), the Lease a term hands its tasks,
// and the Bus, one pub/sub connection per process. Package host wraps it;
// users see only host.Lease, host.Task, host.LeaderTask and host.Bus.
package leader
