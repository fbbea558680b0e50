-- expire: remove the next chunk of a group's finished runs older than its
-- retention (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] group hash, KEYS[4] the group's
-- finished zset (run id -> finished_at ms), KEYS[5] runs zset, KEYS[6]
-- retire zset
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] run-hash key prefix
-- (Keys.RunPrefix), ARGV[4] the namespace's default retention (ms, 0 =
-- forever), ARGV[5] chunk (>= 1), ARGV[6] the group's name
-- returns: {removed, more (0|1)}
-- retire: the group's score becomes when its oldest remaining finished run
-- is due (finished_at + retention; +inf with retention forever), kept as
-- it is while more are due now; the group leaves it when it has no
-- finished run left.
-- The group's retention_ms (absent: the default; 0: forever) applies; the
-- cutoff is Redis TIME minus it. Only runs in a final state are removed
-- (the finished zset holds nothing else; a run found in another state is
-- dropped from it and kept). writes: DEL run hash, ZREM runs, ZREM finished.
-- errors: WS_FENCED (prelude), WS_INVALID (chunk, default).
-- replay: idempotent (a removed run is gone from the finished zset).
-- bound: O(chunk · log n)
local chunk = tonumber(ARGV[5])
local def = tonumber(ARGV[4])
if not chunk or chunk < 1 or not def or def < 0 then
  return redis.error_reply('WS_INVALID expire: bad chunk ' .. ARGV[5] .. ' or default ' .. ARGV[4])
end
local ret = tonumber(redis.call('HGET', KEYS[3], 'retention_ms') or '') or def
local function rescore()
  local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #first == 0 then
    redis.call('ZREM', KEYS[6], ARGV[6])
  elseif ret <= 0 then
    redis.call('ZADD', KEYS[6], '+inf', ARGV[6])
  else
    redis.call('ZADD', KEYS[6], string.format('%d', tonumber(first[2]) + ret), ARGV[6])
  end
end
if ret <= 0 then
  rescore()
  return {0, 0}
end
local cutoff = now_ms() - ret
local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. string.format('%d', cutoff), 'LIMIT', 0, chunk)
local n = 0
for _, id in ipairs(ids) do
  local st = redis.call('HGET', ARGV[3] .. id, 'state')
  if st == 'SUCCEEDED' or st == 'FAILED' or st == 'STOPPED' or st == 'DISCARDED' or not st then
    redis.call('DEL', ARGV[3] .. id)
    redis.call('ZREM', KEYS[5], id)
    n = n + 1
  end
  redis.call('ZREM', KEYS[4], id)
end
if #ids < chunk then
  rescore()
  return {n, 0}
end
return {n, 1}
