-- request_stop: a client asks to stop a run (unfenced).
-- KEYS[1] run hash, KEYS[2] group hash, KEYS[3] waiting zset, KEYS[4] active zset,
-- KEYS[5] launched zset, KEYS[6] dirty set, KEYS[7] the group's finished
-- zset (retention index), KEYS[8] the group's waiting-run index
-- (Keys.WaitInfo), KEYS[9] retire zset, KEYS[10] the group's delayed zset
-- (a WAITING run not due yet leaves it; the group's timer stays: due.lua
-- drops it when it fires), KEYS[11] the launched runs' index
-- (Keys.LaunchInfo)
-- ARGV[1] run id, ARGV[2] group, ARGV[3] reason, ARGV[4] run-events channel
-- (publish_runs: the new state), ARGV[5] the slot-events channels' prefix
-- (a RUNNING run's task-0 slot, on its worker's channel ARGV[5] .. worker,
-- so the worker stops it at once), ARGV[6] work channel
-- (PUBLISH of the group: the coordinator wakes; advisory)
-- returns: the new state. WAITING -> DISCARDED, LAUNCHED -> STOPPED,
-- RUNNING -> STOPPING (the worker finishes it), STOPPING -> STOPPING (no write)
-- errors: WS_NOT_FOUND, WS_BAD_STATE (final: the message names the state)
-- replay: a retried call on a run it already stopped returns WS_BAD_STATE
-- (DISCARDED/STOPPED) or STOPPING; the caller re-reads the run.
-- bound: O(log n) (one run, its group's zsets)
local r = redis.call('HMGET', KEYS[1], 'state', 'group', 'assign')
if not r[1] or r[2] ~= ARGV[2] then
  return redis.error_reply('WS_NOT_FOUND run ' .. ARGV[1] .. ' does not exist')
end
local st = r[1]
if st == 'STOPPING' then return st end
local now = now_ms()
local new
if st == 'WAITING' then
  new = 'DISCARDED'
  redis.call('HSET', KEYS[1], 'state', new, 'finished_at', now, 'reason', ARGV[3])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[8], ARGV[1])
  if KEYS[10] then redis.call('ZREM', KEYS[10], ARGV[1]) end
  redis.call('ZADD', KEYS[7], now, ARGV[1])
  redis.call('ZADD', KEYS[9], 'NX', now, ARGV[2])
elseif st == 'LAUNCHED' then
  new = 'STOPPED'
  redis.call('HSET', KEYS[1], 'state', new, 'finished_at', now, 'reason', ARGV[3])
  redis.call('ZADD', KEYS[7], now, ARGV[1])
  redis.call('ZADD', KEYS[9], 'NX', now, ARGV[2])
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('ZREM', KEYS[5], ARGV[1])
  if KEYS[11] then redis.call('HDEL', KEYS[11], ARGV[1]) end
elseif st == 'RUNNING' then
  new = 'STOPPING'
  redis.call('HSET', KEYS[1], 'state', new, 'reason', ARGV[3])
  local n = {}
  for _, a in ipairs(parse_assign(r[3])) do
    if a.task == 0 then slot_note(n, a, ARGV[1]) end
  end
  publish_slots(ARGV[5], n)
else
  return redis.error_reply('WS_BAD_STATE run ' .. ARGV[1] .. ' is ' .. st .. ': it can no longer be stopped')
end
redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('SADD', KEYS[6], ARGV[2])
if ARGV[6] and ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[6], ARGV[2]) end
publish_runs(ARGV[4], {new .. '#' .. ARGV[2] .. '#' .. ARGV[1]})
return new
