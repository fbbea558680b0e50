-- drain_worker: a worker takes no new runs (worker write, a graceful
-- shutdown).
-- KEYS[1] draining set, KEYS[2] worker hash, KEYS[3] slots hash, KEYS[4]
-- free zset
-- ARGV[1] identity
-- returns: the number of its slots still assigned (its in-flight runs)
-- errors: WS_UNKNOWN_WORKER (not registered, or reaped)
-- writes: SADD draining; its free slots leave the free zset (a slot the
-- worker's runs free later is not offered again: release_slots).
-- replay: idempotent.
-- bound: O(s), s the worker's slots
local n = tonumber(redis.call('HGET', KEYS[2], 'slots') or '')
if not n then
  return redis.error_reply('WS_UNKNOWN_WORKER worker ' .. ARGV[1] .. ' is not registered')
end
redis.call('SADD', KEYS[1], ARGV[1])
local busy = 0
for i = 0, n - 1 do
  local f = ARGV[1] .. '#' .. i
  if redis.call('HGET', KEYS[3], f) == '' then
    redis.call('ZREM', KEYS[4], f)
  else
    busy = busy + 1
  end
end
return busy
