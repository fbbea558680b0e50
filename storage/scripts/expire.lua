-- expire: remove the next chunk of one or more groups' finished runs older
-- than their retention (leader, fenced). One call carries many groups
-- (ExpireBatch sends a pass's due groups as calls of up to 32): the fence
-- and the clock are checked and read once a call, and the call removes at
-- most chunk runs in all (its budget); a group the budget did not reach
-- answers {0, 1} (more: the caller's next round goes on).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] runs zset, KEYS[4] retire zset;
-- then per group: its hash, its finished zset (run id -> finished_at ms)
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] run-hash key prefix
-- (Keys.RunPrefix), ARGV[4] the namespace's default retention (ms, 0 =
-- forever), ARGV[5] chunk (>= 1); then per group: its name
-- returns: per group, in order, {removed, more (0|1)}
-- retire: the group's score becomes when its oldest remaining finished run
-- is due (finished_at + retention; +inf with retention forever), kept as
-- it is while more are due now; the group leaves it when it has no
-- finished run left.
-- The group's retention_ms (absent: the default; 0: forever) applies; the
-- cutoff is Redis TIME minus it. Only runs in a final state are removed
-- (the finished zset holds nothing else; a run found in another state is
-- dropped from it and kept). writes: DEL run hash, ZREM runs, ZREM finished.
-- errors (the whole call, nothing written): WS_FENCED (prelude),
-- WS_INVALID (chunk, default, keys and args that do not match).
-- replay: idempotent (a removed run is gone from the finished zset).
-- bound: O(chunk · log n + g), g the call's groups
local chunk = tonumber(ARGV[5])
local def = tonumber(ARGV[4])
local ng = #ARGV - 5
if not chunk or chunk < 1 or not def or def < 0 or #KEYS ~= 4 + 2 * ng then
  return redis.error_reply('WS_INVALID expire: bad chunk ' .. tostring(ARGV[5]) .. ', default ' .. tostring(ARGV[4]) ..
    ' or ' .. #KEYS .. ' keys for ' .. ng .. ' groups')
end
local budget = chunk
local now
local function expire_one(kgroup, kfinished, name)
  local ret = tonumber(redis.call('HGET', kgroup, 'retention_ms') or '') or def
  local function rescore()
    local first = redis.call('ZRANGE', kfinished, 0, 0, 'WITHSCORES')
    if #first == 0 then
      redis.call('ZREM', KEYS[4], name)
    elseif ret <= 0 then
      redis.call('ZADD', KEYS[4], '+inf', name)
    else
      redis.call('ZADD', KEYS[4], string.format('%d', tonumber(first[2]) + ret), name)
    end
  end
  if ret <= 0 then
    rescore()
    return {0, 0}
  end
  now = now or now_ms()
  local cutoff = now - ret
  local ids = redis.call('ZRANGEBYSCORE', kfinished, '-inf', '(' .. string.format('%d', cutoff), 'LIMIT', 0, budget)
  local n = 0
  for _, id in ipairs(ids) do
    local st = redis.call('HGET', ARGV[3] .. id, 'state')
    if st == 'SUCCEEDED' or st == 'FAILED' or st == 'STOPPED' or st == 'DISCARDED' or not st then
      redis.call('DEL', ARGV[3] .. id)
      redis.call('ZREM', KEYS[3], id)
      n = n + 1
    end
    redis.call('ZREM', kfinished, id)
  end
  local more = #ids >= budget
  budget = budget - #ids
  if not more then
    rescore()
    return {n, 0}
  end
  return {n, 1}
end
local out = {}
for j = 1, ng do
  if budget <= 0 then
    out[j] = {0, 1} -- not reached: the next round
  else
    out[j] = expire_one(KEYS[3 + 2 * j], KEYS[4 + 2 * j], ARGV[5 + j])
  end
end
return out
