-- allocate: give a LAUNCHED run all its k slots on live workers, or none (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] run hash, KEYS[4] workers zset,
-- KEYS[5] slots hash, KEYS[6] free zset, KEYS[7] launched zset, KEYS[8] tokens counter
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] run id, ARGV[4] op id (random per call)
-- returns: flat {worker, index, token, task, ...}
-- errors (nothing written): WS_FENCED, WS_NOT_FOUND, WS_BAD_STATE (not LAUNCHED),
-- WS_NO_SLOTS (fewer than k free slots on live workers)
-- writes: slot values run#token#task, free zset, run RUNNING + started_at +
-- assign + alloc_op, removed from launched. Tokens: "TIME_ms-INCR", unique forever.
-- replay: a retried call finds alloc_op == op on the RUNNING run and returns its assignments.
-- bound: O(k · w) for a run of k slots, w the free-zset window scanned per slot (pick_free)
local r = redis.call('HMGET', KEYS[3], 'state', 'slots', 'alloc_op', 'assign')
if not r[1] then
  return redis.error_reply('WS_NOT_FOUND run ' .. ARGV[3] .. ' does not exist')
end
if r[3] == ARGV[4] then
  return flat_assign(parse_assign(r[4]))
end
if r[1] ~= 'LAUNCHED' then
  return redis.error_reply('WS_BAD_STATE allocate run ' .. ARGV[3] .. ': run is ' .. r[1] .. ', want LAUNCHED')
end
local k = tonumber(r[2]) or 1
local now = now_ms()
local got = pick_free(KEYS[6], KEYS[4], KEYS[5], k, now)
if #got < k then
  return redis.error_reply('WS_NO_SLOTS run ' .. ARGV[3] .. ' needs ' .. k .. ' slots, ' .. #got .. ' free on live workers')
end
local as = {}
for task, s in ipairs(got) do
  local tok = new_token(KEYS[8], now)
  redis.call('HSET', KEYS[5], s.f, ARGV[3] .. '#' .. tok .. '#' .. (task - 1))
  redis.call('ZREM', KEYS[6], s.f)
  as[#as + 1] = {w = s.w, i = s.i, tok = tok, task = task - 1}
end
redis.call('HSET', KEYS[3], 'state', 'RUNNING', 'started_at', now, 'assign', join_assign(as), 'alloc_op', ARGV[4])
redis.call('ZREM', KEYS[7], ARGV[3])
return flat_assign(as)
