-- schedule: create, change, pause, resume or delete a cron schedule
-- (client write, unfenced).
-- KEYS[1] schedules zset, KEYS[2] schedule names set, KEYS[3] schedule hash
-- ARGV[1] op (set|pause|resume|delete), ARGV[2] name, ARGV[3] next tick ms
-- (set, resume: computed by the caller from the cron spec), ARGV[4] work
-- channel (PUBLISH storage.TimerEvent: the leader's timer looks again),
-- ARGV[5..] set: the spec's field/value pairs (group, cron, tz, payload,
-- priority, slots, timeout_ms, max_attempts, backoff, paused)
-- returns: 1
-- errors: WS_NOT_FOUND (pause, resume, delete of an unknown schedule)
-- writes: set: the spec, updated_at (created_at and the counters kept),
-- the names set, the zset at ARGV[3] unless paused; pause: paused 1, ZREM;
-- resume: paused 0, ZADD at ARGV[3]; delete: DEL, SREM, ZREM.
-- bound: O(log n)
local now = now_ms()
local exists = redis.call('EXISTS', KEYS[3]) == 1
local op = ARGV[1]
if op ~= 'set' and not exists then
  return redis.error_reply('WS_NOT_FOUND schedule ' .. ARGV[2] .. ' does not exist')
end
if op == 'set' then
  local f = {'name', ARGV[2], 'updated_at', now}
  for i = 5, #ARGV do f[#f + 1] = ARGV[i] end
  if not exists then
    f[#f + 1] = 'created_at'; f[#f + 1] = now
  end
  redis.call('HDEL', KEYS[3], 'group', 'cron', 'tz', 'payload', 'priority', 'slots', 'timeout_ms', 'max_attempts', 'backoff')
  redis.call('HSET', KEYS[3], unpack(f))
  redis.call('SADD', KEYS[2], ARGV[2])
  if redis.call('HGET', KEYS[3], 'paused') == '1' then
    redis.call('ZREM', KEYS[1], ARGV[2])
  else
    redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
  end
elseif op == 'pause' then
  redis.call('HSET', KEYS[3], 'paused', '1', 'updated_at', now)
  redis.call('ZREM', KEYS[1], ARGV[2])
elseif op == 'resume' then
  redis.call('HSET', KEYS[3], 'paused', '0', 'updated_at', now)
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
elseif op == 'delete' then
  redis.call('DEL', KEYS[3])
  redis.call('SREM', KEYS[2], ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[2])
else
  return redis.error_reply('WS_INVALID schedule: unknown op ' .. op)
end
redis.call('PUBLISH', ARGV[4], '#timer')
return 1
