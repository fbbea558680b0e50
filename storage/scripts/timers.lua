-- timers: what the leader's timer task must do now (read-only).
-- KEYS[1] timers zset, KEYS[2] schedules zset
-- ARGV[1] limit (groups and schedules each)
-- returns: {now ms, {due groups}, next group timer ms not among them (-1:
-- none), {due schedules}, next schedule tick ms not among them (-1: none)}
-- by Redis time, so a host's clock does not decide what is due.
-- bound: O(log n + limit)
local now = now_ms()
local lim = tonumber(ARGV[1]) or 64
local nows = string.format('%d', now)
local function due(k)
  local ids = redis.call('ZRANGEBYSCORE', k, '-inf', nows, 'LIMIT', 0, lim)
  local n = redis.call('ZRANGEBYSCORE', k, '(' .. nows, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local nxt = -1
  if #ids < lim and #n == 2 then nxt = tonumber(n[2]) end
  if #ids == lim then nxt = now end
  return ids, nxt
end
local g, gn = due(KEYS[1])
local s, sn = due(KEYS[2])
return {now, g, gn, s, sn}
