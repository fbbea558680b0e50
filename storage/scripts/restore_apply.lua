-- restore_apply: apply a slot-reuse decision for a restored run (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] run hash, KEYS[4] workers zset,
-- KEYS[5] slots hash, KEYS[6] free zset, KEYS[7] restore set, KEYS[8] tokens counter
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] run id, ARGV[4] op id, ARGV[5] ms
-- since the caller's term began (-1: none; a reused slot's worker whose
-- heartbeat expired is alive while spared: _lib.lua), ARGV[6] the worker
-- hashes' key prefix (Keys.Worker of ""), ARGV[7] number of reused tasks
-- R, ARGV[8..7+R] reused tasks, ARGV[8+R..] reallocated tasks
-- returns: flat {worker, index, token, task, ...} (all tasks, after the change)
-- errors (nothing written): WS_FENCED, WS_NOT_FOUND, WS_BAD_STATE (not
-- RUNNING/STOPPING), WS_INVALID (tasks not a partition of 0..k-1),
-- WS_STALE (a reused slot's worker is dead (not spared) or the slot no longer holds
-- run#token#task: re-check), WS_NO_SLOTS (realloc needs more free slots;
-- the retained slots stay with the run)
-- writes: new slots for reallocated tasks (fresh tokens), releases the old
-- slot of a reallocated task only if it still holds run#token#task, assign,
-- restore_op; SREM restore.
-- replay: a retried call finds restore_op == op and returns the assignments.
-- bound: O(k), k the slots of the run
local r = redis.call('HMGET', KEYS[3], 'state', 'slots', 'assign', 'restore_op', 'group', 'require')
if not r[1] then
  return redis.error_reply('WS_NOT_FOUND run ' .. ARGV[3] .. ' does not exist')
end
if r[4] == ARGV[4] then
  return flat_assign(parse_assign(r[3]))
end
if r[1] ~= 'RUNNING' and r[1] ~= 'STOPPING' then
  return redis.error_reply('WS_BAD_STATE restore run ' .. ARGV[3] .. ': run is ' .. r[1] .. ', want RUNNING or STOPPING')
end
local k = tonumber(r[2]) or 1
local nre = tonumber(ARGV[7]) or -1
local byTask = {}
for _, a in ipairs(parse_assign(r[3])) do byTask[a.task] = a end
local seen, reuse, realloc = {}, {}, {}
for j = 8, #ARGV do
  local t = tonumber(ARGV[j])
  if not t or t < 0 or t >= k or seen[t] then
    return redis.error_reply('WS_INVALID restore run ' .. ARGV[3] .. ': bad or repeated task ' .. ARGV[j])
  end
  seen[t] = true
  if j < 8 + nre then reuse[#reuse + 1] = t else realloc[#realloc + 1] = t end
end
if #ARGV - 7 ~= k or nre < 0 or nre > k then
  return redis.error_reply('WS_INVALID restore run ' .. ARGV[3] .. ': reuse + realloc must cover tasks 0..' .. (k - 1))
end
local now, since = now_ms(), tonumber(ARGV[5]) or -1
for _, t in ipairs(reuse) do
  local a = byTask[t]
  if not a then
    return redis.error_reply('WS_STALE restore run ' .. ARGV[3] .. ': task ' .. t .. ' has no recorded slot to reuse')
  end
  local sc = redis.call('ZSCORE', KEYS[4], a.w)
  if not sc or (tonumber(sc) <= now and not spared(ARGV[6] .. a.w, since)) then
    return redis.error_reply('WS_STALE restore run ' .. ARGV[3] .. ': worker ' .. a.w .. ' of task ' .. t .. ' is not alive')
  end
  if redis.call('HGET', KEYS[5], a.w .. '#' .. a.i) ~= ARGV[3] .. '#' .. a.tok .. '#' .. t then
    return redis.error_reply('WS_STALE restore run ' .. ARGV[3] .. ': slot ' .. a.w .. '#' .. a.i .. ' no longer holds task ' .. t)
  end
end
-- a reallocated task goes only where the run may (its requirements, the
-- workers' groups: _lib.lua Placement)
local got = pick_free(KEYS[6], KEYS[4], KEYS[5], #realloc, now, nil, #realloc > 0 and placement(KEYS[6]) or nil, r[5] or '', (parse_req(r[6])))
if #got < #realloc then
  return redis.error_reply('WS_NO_SLOTS restore run ' .. ARGV[3] .. ' needs ' .. #realloc .. ' slots, ' .. #got .. ' free on live workers')
end
for j, t in ipairs(realloc) do
  if byTask[t] then
    release_slots(KEYS[5], KEYS[6], ARGV[3], {byTask[t]})
  end
  byTask[t] = claim_slot(KEYS[5], KEYS[6], KEYS[8], got[j], ARGV[3], t, now)
end
local as = {}
for t = 0, k - 1 do as[#as + 1] = byTask[t] end
redis.call('HSET', KEYS[3], 'assign', join_assign(as), 'restore_op', ARGV[4])
redis.call('SREM', KEYS[7], ARGV[3])
return flat_assign(as)
