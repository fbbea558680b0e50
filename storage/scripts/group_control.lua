-- group_control: pause or resume a group (client write, unfenced).
-- KEYS[1] group hash, KEYS[2] dirty set
-- ARGV[1] op (pause|resume), ARGV[2] group, ARGV[3] who, ARGV[4] work
-- channel (PUBLISH of the group on resume: the coordinator wakes)
-- returns: the group's version after the change
-- errors: WS_NOT_FOUND (no such group), WS_INVALID (op)
-- writes: pause: paused 1, paused_at, paused_by; version+1 (a decision made
-- on an earlier snapshot is stale: it cannot launch after the pause);
-- while paused the leader asks no policy (it settles the group: the
-- snapshot says paused), submits are accepted and active runs go on.
-- resume: the pause fields go, version+1, dirty, PUBLISH.
-- replay: idempotent but for the version bump (harmless).
-- bound: O(1)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('WS_NOT_FOUND group ' .. ARGV[2] .. ' does not exist')
end
if ARGV[1] == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1', 'paused_at', now_ms(), 'paused_by', ARGV[3])
  return redis.call('HINCRBY', KEYS[1], 'version', 1)
elseif ARGV[1] == 'resume' then
  redis.call('HDEL', KEYS[1], 'paused', 'paused_at', 'paused_by')
  local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('PUBLISH', ARGV[4], ARGV[2])
  return v
end
return redis.error_reply('WS_INVALID group control: unknown op ' .. ARGV[1])
