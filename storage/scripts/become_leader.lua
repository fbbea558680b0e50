-- become_leader: record the lock holder as leader and bump the epoch.
-- KEYS[1] fence hash, KEYS[2] leader lock key
-- ARGV[1] holder stamp
-- returns: new epoch (integer)
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
local e = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'since', now)
return e
