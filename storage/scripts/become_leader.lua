-- become_leader: record the lock holder as leader and raise the epoch to
-- the larger of the last epoch + 1 and Redis TIME in milliseconds, so an
-- epoch is never issued twice even when a failover promoted a replica that
-- missed the last epoch change (the clock moved on; RATIONALE.md "Why
-- durable acknowledgements, epochs from the clock, ...?").
-- KEYS[1] fence hash, KEYS[2] leader lock key
-- ARGV[1] holder stamp
-- returns: new epoch (integer, > every earlier one and >= now in ms)
-- errors: WS_NOT_HOLDER if GET(lock) ~= stamp (nothing written)
-- replay: a retried call bumps the epoch once more; the returned epoch is the
-- fence's, so the caller and the fence agree.
-- bound: O(1)
if ARGV[1] == nil or ARGV[1] == '' then
  return redis.error_reply('WS_INVALID empty holder stamp')
end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return redis.error_reply('WS_NOT_HOLDER lock is not held by ' .. ARGV[1])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local e = math.max(tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0') + 1, now)
redis.call('HSET', KEYS[1], 'epoch', string.format('%d', e), 'holder', ARGV[1], 'since', now)
return e
