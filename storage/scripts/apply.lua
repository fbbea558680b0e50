-- apply: apply a policy decision to one group and place its launches on
-- free slots (leader, fenced, version CAS).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] group hash, KEYS[4] waiting zset,
-- KEYS[5] active zset, KEYS[6] dirty set, KEYS[7] launched zset,
-- KEYS[8] drain set, KEYS[9] the group's finished zset (retention index),
-- KEYS[10] the group's decisions list, KEYS[11] the group's waiting-run
-- index (Keys.WaitInfo), KEYS[12] workers zset, KEYS[13] slots hash,
-- KEYS[14] free zset, KEYS[15] tokens counter, KEYS[16] retire zset,
-- KEYS[17] the group's launches list (Keys.Launches), KEYS[18] timers zset,
-- KEYS[19] the launched runs' index (Keys.LaunchInfo),
-- KEYS[20..19+n] run hash of action 1..n
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] group, ARGV[4] snapshot version,
-- ARGV[5] claim id, ARGV[6] policy, ARGV[7] policy version,
-- ARGV[8] discard_below (0 = none), ARGV[9] its reason, ARGV[10] again
-- (1 = the snapshot's window was truncated: keep the group dirty after a
-- non-empty decision, so it is decided again on the next window),
-- ARGV[11] policy sha256, ARGV[12] policy registry version (0 = built-in),
-- ARGV[13] decisions kept per group (the decisions list's length),
-- ARGV[14] run-events channel (publish_runs: each named run's new state),
-- ARGV[15] slot-events channel (the task-0 slot of each run placed here),
-- ARGV[16] '1' = place launches on free slots,
-- ARGV[17] wake ms (0 = none: the policy asks to be decided again then),
-- ARGV[18] work channel (a wake PUBLISHes storage.TimerEvent), ARGV[19]
-- the wake's minimum interval ms (abi.MinWakeInterval), ARGV[20] its
-- horizon ms (abi.MaxWakeAhead), ARGV[21] launches kept (abi.MaxLaunches;
-- 0: the deciding policy does not read them: none recorded, and the
-- group's list and hist flag are dropped),
-- ARGV[22..] per action: kind ("launch"|"discard"|"stop"), run id, reason
-- returns: {the group's version after the apply, launches left LAUNCHED
-- (for the slot manager)}
-- errors (nothing written): WS_FENCED, WS_NOT_FOUND (group; run unknown or of
-- another group), WS_DUP (claim == group.last_claim), WS_STALE (version),
-- WS_INVALID (arity, unknown kind, two actions on one run), WS_BAD_STATE
-- (includes launch or discard of a run covered by the group's discard_below)
-- zero actions and no discard_below = settle: SREM dirty (version matched),
-- no bump. A wake (either way) is held to [now + ARGV[19], now + ARGV[20]]
-- and kept if earlier than the group's pending one: wake_at in the group
-- hash, the group's timer lowered to it (ZADD LT), one PUBLISH of
-- storage.TimerEvent; due.lua fires it (the group becomes dirty).
-- Otherwise: each named run gets the decision record in its
-- field dec (claim, epoch, decided_at, action, policy, policy version,
-- policy sha256, policy registry version, reason, 0x1f-separated; a launch
-- also sets policy and policy_version, the launching version), the group's
-- decisions list gets the decision's summary (newest first; trimmed to
-- ARGV[13] once it is twice as long: readers read the first ARGV[13]),
-- version+1, last_claim = claim, SREM dirty (unless again). A discard_below
-- above the group's raises it (discard_below, discard_reason) and SADDs the
-- group to drain: the leader discards the covered runs in chunks
-- (drain.lua); they leave every snapshot at once.
-- Placing (ARGV[16] = '1'; the leader passes '0' while a LAUNCHED run waits
-- for slots, so none overtakes it): each launch takes all of its slots on
-- live workers at once (as allocate_batch: RUNNING, started_at =
-- launched_at, assign, a fresh token per slot, one slot-events message);
-- from the first launch that does not fit on, the launches queue in
-- launched (LAUNCHED) for the slot manager, in order. Each launch goes on
-- the launches list ("launched_ms,labels", one LPUSH per decision; trimmed
-- to ARGV[21] once twice as long) when ARGV[21] > 0, and the group gets
-- hist = 1 (snapshots read the list, reports hand back no snapshot).
-- A decision is complete for its snapshot: the group is not re-marked
-- dirty here (but for again); only a change from outside a decision
-- (submit, report, fail_run, request_stop, set_group) marks it dirty again
-- (README.md "Dirty contract").
-- bound: O(n · (log m + k) + f), n actions (at most the snapshot's runs plus
-- one), k slots each, f free-zset entries read (free_cursor)
local n = #KEYS - 19
if #ARGV ~= 21 + 3 * n then
  return redis.error_reply('WS_INVALID apply: ' .. n .. ' run keys for ' .. (#ARGV - 21) .. ' action args')
end
local function set_wake(now)
  local w = tonumber(ARGV[17]) or 0
  if w <= 0 then return end
  w = math.min(math.max(w, now + tonumber(ARGV[19])), now + tonumber(ARGV[20]))
  local cur = tonumber(redis.call('HGET', KEYS[3], 'wake_at') or '')
  if cur and cur <= w then return end
  local ws = string.format('%d', w)
  redis.call('HSET', KEYS[3], 'wake_at', ws)
  redis.call('ZADD', KEYS[18], 'LT', ws, ARGV[3])
  redis.call('PUBLISH', ARGV[18], '#timer') -- storage.TimerEvent
end
local below = tonumber(ARGV[8]) or 0
local g = redis.call('HMGET', KEYS[3], 'version', 'last_claim', 'discard_below', 'hist')
if not g[1] then
  return redis.error_reply('WS_NOT_FOUND group ' .. ARGV[3] .. ' does not exist')
end
if ARGV[5] ~= '' and g[2] == ARGV[5] then
  return redis.error_reply('WS_DUP claim ' .. ARGV[5] .. ' already applied to group ' .. ARGV[3])
end
if g[1] ~= ARGV[4] then
  return redis.error_reply('WS_STALE group ' .. ARGV[3] .. ' is at version ' .. g[1] .. ', decision made at ' .. ARGV[4])
end
local covered = tonumber(g[3]) or 0
local seen, acts = {}, {}
for j = 1, n do
  local kind, id, reason = ARGV[19 + 3 * j], ARGV[20 + 3 * j], ARGV[21 + 3 * j]
  if seen[id] then
    return redis.error_reply('WS_INVALID two actions on run ' .. id)
  end
  seen[id] = true
  local a = {kind = kind, id = id, reason = reason, key = KEYS[19 + j]}
  if kind == 'launch' or kind == 'discard' then
    -- a WAITING run of this group is in its index: seq and slots at once
    local info = redis.call('HGET', KEYS[11], id)
    local seq, slots
    if info then
      local s, p, k = string.match(info, '^(%d+),(-?%d+),(%d+),')
      seq, slots = tonumber(s), tonumber(k)
      a.prio = p -- (a field in a multiple assignment trips the embedded store's Lua)
      a.labels = string.match(info, '^[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,(.*)$') or ''
    else
      -- not indexed (submitted before the index existed, or not WAITING)
      seq = tonumber(redis.call('ZSCORE', KEYS[4], id) or '')
      if seq then
        local r = redis.call('HMGET', a.key, 'slots', 'labels', 'priority')
        slots, a.labels = tonumber(r[1] or '1'), r[2] or ''
        a.prio = r[3]
      end
    end
    if not seq then
      local r = redis.call('HMGET', a.key, 'state', 'group')
      if not r[1] or r[2] ~= ARGV[3] then
        return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. ARGV[3])
      end
      return redis.error_reply('WS_BAD_STATE ' .. kind .. ' run ' .. id .. ': run is ' .. r[1] .. ', want WAITING')
    end
    if seq < covered then
      return redis.error_reply('WS_BAD_STATE ' .. kind .. ' run ' .. id .. ': covered by the group\'s discard_below ' .. covered)
    end
    a.seq, a.slots, a.st = seq, slots or 1, 'WAITING'
  elseif kind == 'stop' then
    local r = redis.call('HMGET', a.key, 'state', 'group')
    if not r[1] or r[2] ~= ARGV[3] then
      return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. ARGV[3])
    end
    if r[1] ~= 'LAUNCHED' and r[1] ~= 'RUNNING' then
      return redis.error_reply('WS_BAD_STATE stop run ' .. id .. ': run is ' .. r[1] .. ', want LAUNCHED or RUNNING')
    end
    a.st = r[1]
  else
    return redis.error_reply('WS_INVALID unknown action kind ' .. kind)
  end
  acts[j] = a
end
if n == 0 and below == 0 then
  redis.call('SREM', KEYS[6], ARGV[3])
  if ARGV[17] ~= '0' then set_wake(now_ms()) end
  return {tonumber(g[1]), 0}
end
local now = now_ms()
set_wake(now)
local hist = {}
local counts = {launch = 0, discard = 0, stop = 0}
local ev, notify, gone, finished = {}, {}, {}, false
local free, queued = nil, 0
local place = ARGV[16] == '1'
local need = 0 -- the free-zset window: the launches' slots, and a few for dead workers' entries
for _, a in ipairs(acts) do
  if a.kind == 'launch' then need = need + a.slots end
end
-- the decision record of each run the decision names, one field:
-- claim, epoch, decided_at, action, policy, policy version, sha256,
-- registry version, reason (0x1f-separated; storage.parseDecision)
local nows = string.format('%d', now)
local dhead = ARGV[5] .. '\31' .. ARGV[1] .. '\31' .. nows .. '\31'
local dtail = '\31' .. ARGV[6] .. '\31' .. ARGV[7] .. '\31' .. ARGV[11] .. '\31' .. ARGV[12] .. '\31'
for _, a in ipairs(acts) do
  counts[a.kind] = counts[a.kind] + 1
  local dec = dhead .. a.kind .. dtail .. a.reason
  if a.kind == 'launch' then
    hist[#hist + 1] = nows .. ',' .. a.labels
    gone[#gone + 1] = a.id
    redis.call('ZREM', KEYS[4], a.id)
    redis.call('ZADD', KEYS[5], a.seq, a.id)
    ev[#ev + 1] = 'LAUNCHED#' .. ARGV[3] .. '#' .. a.id
    local got
    if place then
      free = free or free_cursor(KEYS[14], KEYS[12], KEYS[13], now, math.min(need + 4, 64))
      got = free.take(a.slots)
      place = got ~= nil -- the first misfit queues, and every launch after it
    end
    -- policy and policy_version are the launching decision's (a later
    -- stop decision only replaces dec)
    if got then
      local as = {}
      for task, s in ipairs(got) do
        as[#as + 1] = claim_slot(KEYS[13], KEYS[14], KEYS[15], s, a.id, task - 1, now)
      end
      redis.call('HSET', a.key, 'dec', dec, 'state', 'RUNNING', 'launched_at', nows, 'started_at', nows,
        'assign', join_assign(as), 'policy', ARGV[6], 'policy_version', ARGV[7])
      notify[#notify + 1] = as[1].w .. '#' .. as[1].i .. '#' .. a.id
      ev[#ev + 1] = 'RUNNING#' .. ARGV[3] .. '#' .. a.id
    else
      redis.call('HSET', a.key, 'dec', dec, 'state', 'LAUNCHED', 'launched_at', nows, 'policy', ARGV[6], 'policy_version', ARGV[7])
      redis.call('ZADD', KEYS[7], a.seq, a.id)
      redis.call('HSET', KEYS[19], a.id, a.seq .. ',' .. a.slots .. ',' .. (a.prio or '0') .. ',' .. nows .. ',' .. ARGV[3] .. ',' .. a.labels)
      queued = queued + 1
    end
  elseif a.kind == 'discard' then
    redis.call('HSET', a.key, 'dec', dec, 'state', 'DISCARDED', 'finished_at', nows, 'reason', a.reason)
    gone[#gone + 1] = a.id
    redis.call('ZREM', KEYS[4], a.id)
    redis.call('ZADD', KEYS[9], now, a.id)
    finished = true
    ev[#ev + 1] = 'DISCARDED#' .. ARGV[3] .. '#' .. a.id
  elseif a.st == 'LAUNCHED' then
    redis.call('HSET', a.key, 'dec', dec, 'state', 'STOPPED', 'finished_at', nows, 'reason', a.reason)
    redis.call('ZADD', KEYS[9], now, a.id)
    redis.call('ZREM', KEYS[5], a.id)
    redis.call('ZREM', KEYS[7], a.id)
    redis.call('HDEL', KEYS[19], a.id)
    finished = true
    ev[#ev + 1] = 'STOPPED#' .. ARGV[3] .. '#' .. a.id
  else
    redis.call('HSET', a.key, 'dec', dec, 'state', 'STOPPING', 'reason', a.reason)
    ev[#ev + 1] = 'STOPPING#' .. ARGV[3] .. '#' .. a.id
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[11], unpack(gone))
end
local keep = tonumber(ARGV[21]) or 0
if keep > 0 and #hist > 0 then
  if g[4] ~= '1' then redis.call('HSET', KEYS[3], 'hist', '1') end
  local hl = redis.call('LPUSH', KEYS[17], unpack(hist))
  if hl > 2 * keep then redis.call('LTRIM', KEYS[17], 0, keep - 1) end
elseif keep == 0 and g[4] == '1' then
  redis.call('HDEL', KEYS[3], 'hist')
  redis.call('DEL', KEYS[17])
end
if finished then
  redis.call('ZADD', KEYS[16], 'NX', now, ARGV[3])
end
publish_runs(ARGV[14], ev)
if #notify > 0 then
  redis.call('PUBLISH', ARGV[15], table.concat(notify, ' '))
end
local kept = math.max(tonumber(ARGV[13]) or 20, 1)
local dl = redis.call('LPUSH', KEYS[10], table.concat({now, ARGV[5], ARGV[1], ARGV[6], ARGV[7], ARGV[12],
  counts.launch, counts.discard, counts.stop, below}, '\31'))
if dl > 2 * kept then
  redis.call('LTRIM', KEYS[10], 0, kept - 1)
end
if below > covered then
  redis.call('HSET', KEYS[3], 'discard_below', string.format('%d', below), 'discard_reason', ARGV[9])
  redis.call('SADD', KEYS[8], ARGV[3])
end
local v = tonumber(g[1]) + 1
redis.call('HSET', KEYS[3], 'version', v, 'last_claim', ARGV[5])
if ARGV[10] ~= '1' then
  redis.call('SREM', KEYS[6], ARGV[3])
end
return {v, queued}
