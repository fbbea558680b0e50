-- note_lost: keep the report of a run the store no longer has (worker
-- write): a worker executed it, then a Redis failover lost the run.
-- KEYS[1] lost list
-- ARGV[1] run id, ARGV[2] token, ARGV[3] worker, ARGV[4] outcome,
-- ARGV[5] reason, ARGV[6] max entries kept
-- returns: the list's length
-- writes: LPUSH "ms|run|token|outcome|worker|reason", LTRIM to ARGV[6].
-- replay: a retried call keeps the report twice.
-- bound: O(1) amortised
local e = string.format('%d', now_ms()) .. '|' .. ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[4] .. '|' .. ARGV[3] .. '|' .. ARGV[5]
local n = redis.call('LPUSH', KEYS[1], e)
local max = tonumber(ARGV[6])
if n > max then
  redis.call('LTRIM', KEYS[1], 0, max - 1)
  n = max
end
return n
