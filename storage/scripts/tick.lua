-- tick: the leader's periodic liveness mark, the first fenced write
-- (issue 4); the fencing prelude is prepended (scripts.go "fenced").
-- KEYS[1] fence hash, KEYS[2] leader lock key, KEYS[3] tick hash
-- ARGV[1] epoch, ARGV[2] holder stamp
-- returns: count, the number of ticks of this term (epoch) so far, integer
-- errors: WS_FENCED (prelude; nothing written)
-- writes: tick hash {holder, epoch, at (ms, TIME), count}; count restarts at
-- 1 when the epoch changes, so a write by a deposed leader would show up as
-- a drop in count.
-- replay: a retried call counts one more tick (harmless: liveness only).
-- bound: O(1)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prev = redis.call('HGET', KEYS[3], 'epoch')
local n = 1
if prev == ARGV[1] then
  n = redis.call('HINCRBY', KEYS[3], 'count', 1)
else
  redis.call('HSET', KEYS[3], 'count', 1)
end
redis.call('HSET', KEYS[3], 'holder', ARGV[2], 'epoch', ARGV[1], 'at', now)
return n
