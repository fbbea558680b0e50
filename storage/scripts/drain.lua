-- drain: discard the next chunk of a group's runs covered by its
-- discard_below (leader, fenced): WAITING runs with seq < discard_below.
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] group hash, KEYS[4] waiting zset,
-- KEYS[5] drain set, KEYS[6] the group's finished zset (retention index),
-- KEYS[7] the group's waiting-run index (Keys.WaitInfo), KEYS[8] retire zset
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] group, ARGV[4] run-hash key prefix
-- (Keys.RunPrefix), ARGV[5] chunk (runs per call, >= 1), ARGV[6] run-events
-- channel (publish_runs: DISCARDED per run, one message per call)
-- returns: {discarded, more (0|1)}
-- writes: each run state DISCARDED, finished_at, reason (the group's
-- discard_reason); ZREM waiting, HDEL the index. When no covered run is left (or the group
-- is gone): SREM drain. No version bump, not dirty: covered runs are not in
-- any snapshot (snapshot.lua), so a decision cannot depend on them.
-- errors: WS_FENCED (prelude), WS_INVALID (chunk).
-- replay: idempotent (a drained run is no longer in waiting).
-- bound: O(chunk · log n)
local chunk = tonumber(ARGV[5])
if not chunk or chunk < 1 then
  return redis.error_reply('WS_INVALID drain: bad chunk ' .. ARGV[5])
end
local g = redis.call('HMGET', KEYS[3], 'discard_below', 'discard_reason')
local lo = tonumber(g[1]) or 0
if lo <= 0 then
  redis.call('SREM', KEYS[5], ARGV[3])
  return {0, 0}
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. string.format('%d', lo), 'LIMIT', 0, chunk)
local now = now_ms()
local ev = {}
for _, id in ipairs(ids) do
  redis.call('HSET', ARGV[4] .. id, 'state', 'DISCARDED', 'finished_at', now, 'reason', g[2] or '')
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZADD', KEYS[6], now, id)
  ev[#ev + 1] = 'DISCARDED#' .. ARGV[3] .. '#' .. id
end
if #ids > 0 then
  redis.call('HDEL', KEYS[7], unpack(ids))
  redis.call('ZADD', KEYS[8], 'NX', now, ARGV[3])
end
publish_runs(ARGV[6], ev)
if #ids < chunk then
  redis.call('SREM', KEYS[5], ARGV[3])
  return {#ids, 0}
end
return {#ids, 1}
