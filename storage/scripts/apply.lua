-- apply: apply policy decisions to groups and place their launches on
-- free slots (leader, fenced, version CAS per group). One call carries the
-- decisions of one or more groups (storage.ApplyBatch sends a pass's batch
-- as a few calls): the fence, the clock and the free-slot cursor are
-- checked and read once per call, each group's decision is applied on its
-- own (its error leaves it alone and the others go on).
-- KEYS (shared): [1] fence, [2] lock, [3] dirty set, [4] launched zset,
-- [5] drain set, [6] workers zset, [7] slots hash, [8] free zset,
-- [9] tokens counter, [10] retire zset, [11] timers zset, [12] the
-- launched runs' index (Keys.LaunchInfo); then per group: its hash,
-- waiting zset, active zset, finished zset (retention index), decisions
-- list, waiting-run index (Keys.WaitInfo), launches list (Keys.Launches),
-- then the run hash of each of its n actions
-- ARGV (shared): [1] epoch, [2] holder, [3] decisions kept per group (the
-- decisions list's length), [4] run-events channel (publish_runs: each
-- named run's new state), [5] slot-events channel (the task-0 slot of
-- each run placed here), [6] work channel (a wake PUBLISHes
-- storage.TimerEvent), [7] the wake's minimum interval ms
-- (abi.MinWakeInterval), [8] its horizon ms (abi.MaxWakeAhead); then per
-- group: n (its actions), group, snapshot version, claim id, policy,
-- policy version, discard_below (0 = none), its reason, again (1 = the
-- snapshot's window was truncated: keep the group dirty after a non-empty
-- decision, so it is decided again on the next window), policy sha256,
-- policy registry version (0 = built-in), place ('1' = place launches on
-- free slots), wake ms (0 = none: the policy asks to be decided again
-- then), launches kept (abi.MaxLaunches; 0: the deciding policy does not
-- read them: none recorded, and the group's list and hist flag are
-- dropped), view ('1' = the leader keeps the view this decision leaves:
-- dv is written, else cleared; '1,lo,hi,oldest,newest' = a view of a
-- truncated window: dv records its gap too, storage.ViewGap); then per
-- action: kind
-- ("launch"|"discard"|"stop"), run id, reason
-- returns: per group, in order, {the group's version after the apply,
-- launches left LAUNCHED (for the slot manager)} or that group's error
-- reply
-- errors (the whole call, nothing written): WS_FENCED, WS_INVALID (arity)
-- a command of a group failing at run time (a corrupt key: WRONGTYPE) is
-- that group's error reply; what it wrote before stays, the groups after
-- it are applied and the call's shared writes are made (pcall)
-- errors (per group, nothing written for it): WS_NOT_FOUND (group; run
-- unknown or of another group), WS_DUP (claim == group.last_claim),
-- WS_STALE (version), WS_INVALID (two actions on one run, unknown kind),
-- WS_BAD_STATE (includes launch or discard of a run covered by the group's
-- discard_below)
-- zero actions and no discard_below = settle: SREM dirty (version matched),
-- no bump. A wake (either way) is held to [now + min interval, now + horizon]
-- and kept if earlier than the group's pending one: wake_at in the group
-- hash, the group's timer lowered to it (ZADD LT), one PUBLISH of
-- storage.TimerEvent; due.lua fires it (the group becomes dirty).
-- Otherwise: each named run gets the decision record in its
-- field dec (claim, epoch, decided_at, action, policy, policy version,
-- policy sha256, policy registry version, reason, 0x1f-separated; a launch
-- also sets policy and policy_version, the launching version), the group's
-- decisions list gets the decision's summary (newest first; trimmed to
-- the decisions kept once it is twice as long: readers read the first that many),
-- version+1, last_claim = claim, dv = the new version when view = '1'
-- (report.lua; with the view's gap after it, "v,lo,hi,oldest,newest";
-- '' otherwise), SREM dirty (unless again). A discard_below
-- above the group's raises it (discard_below, discard_reason) and SADDs the
-- group to drain: the leader discards the covered runs in chunks
-- (drain.lua); they leave every snapshot at once.
-- Placing (place = '1'; the leader passes '0' while a LAUNCHED run waits
-- for slots, so none overtakes it): each launch takes all of its slots on
-- live workers at once (as allocate_batch: RUNNING, started_at =
-- launched_at, assign, a fresh token per slot, one slot-events message);
-- from the first launch that does not fit on, the launches queue in
-- launched (LAUNCHED) for the slot manager, in order. Each launch goes on
-- the launches list ("launched_ms,labels", one LPUSH per decision; trimmed
-- to the launches kept once twice as long) when launches kept > 0, and the group gets
-- hist = 1 (snapshots read the list, reports hand back no snapshot).
-- A decision is complete for its snapshot: the group is not re-marked
-- dirty here (but for again); only a change from outside a decision
-- (submit, report, fail_run, request_stop, set_group) marks it dirty again
-- (README.md "Dirty contract").
-- bound: O(n · (log m + k) + f), n actions (at most the snapshot's runs plus
-- one), k slots each, f free-zset entries read (free_cursor)
-- apply_one (in the single-group layout A and K below):
-- K[1] fence, K[2] lock, K[3] group hash, K[4] waiting zset, K[5] active
-- zset, K[6] dirty set, K[7] launched zset, K[8] drain set, K[9] finished
-- zset, K[10] decisions list, K[11] waiting-run index, K[12] workers zset,
-- K[13] slots hash, K[14] free zset, K[15] tokens counter, K[16] retire
-- zset, K[17] launches list, K[18] timers zset, K[19] launched runs'
-- index, K[20..19+n] run hash of action 1..n; A[1] epoch, A[2] holder,
-- A[3] group, A[4] snapshot version, A[5] claim id, A[6] policy, A[7]
-- policy version, A[8] discard_below, A[9] its reason, A[10] again, A[11]
-- sha256, A[12] registry version, A[13] decisions kept, A[14] run-events
-- channel, A[15] slot-events channel, A[16] place, A[17] wake ms, A[18]
-- work channel, A[19] min wake interval, A[20] wake horizon, A[21]
-- launches kept, A[22] view, A[23..] per action: kind, run id, reason.
-- S: what the groups of one call share (the clock, read once; the free
-- cursor with its worker-liveness cache; the batch's launch count, for
-- the cursor's window; the token counter, one INCR; the groups leaving
-- dirty, one SREM; the run events and slot announcements, each one
-- PUBLISH for the call)
local S = {need = 0, ev = {}, notify = {}, tok = {key = KEYS[9], n = 0}, settled = {}, taken = {}}
function S.now()
  S.t = S.t or now_ms()
  return S.t
end
local function set_wake(K, A, now)
  local w = tonumber(A[17]) or 0
  if w <= 0 then return end
  w = math.min(math.max(w, now + tonumber(A[19])), now + tonumber(A[20]))
  local cur = tonumber(redis.call('HGET', K[3], 'wake_at') or '')
  if cur and cur <= w then return end
  local ws = string.format('%d', w)
  redis.call('HSET', K[3], 'wake_at', ws)
  redis.call('ZADD', K[18], 'LT', ws, A[3])
  S.timer = true -- one PUBLISH of storage.TimerEvent for the call
end
-- apply_one applies one group's decision: K and A are a single group's
-- keys and args in the layout below (the shared ones copied in), n its
-- actions; returns {version, queued} or an error reply (nothing written
-- for the group).
local function apply_one(K, A, n)
  local below = tonumber(A[8]) or 0
  local g = redis.call('HMGET', K[3], 'version', 'last_claim', 'discard_below', 'hist')
  if not g[1] then
    return redis.error_reply('WS_NOT_FOUND group ' .. A[3] .. ' does not exist')
  end
  if A[5] ~= '' and g[2] == A[5] then
    return redis.error_reply('WS_DUP claim ' .. A[5] .. ' already applied to group ' .. A[3])
  end
  if g[1] ~= A[4] then
    return redis.error_reply('WS_STALE group ' .. A[3] .. ' is at version ' .. g[1] .. ', decision made at ' .. A[4])
  end
  local covered = tonumber(g[3]) or 0
  local seen, acts = {}, {}
  for j = 1, n do
    local kind, id, reason = A[20 + 3 * j], A[21 + 3 * j], A[22 + 3 * j]
    if seen[id] then
      return redis.error_reply('WS_INVALID two actions on run ' .. id)
    end
    seen[id] = true
    local a = {kind = kind, id = id, reason = reason, key = K[19 + j]}
    if kind == 'launch' or kind == 'discard' then
      -- a WAITING run of this group is in its index: seq and slots at once
      local info = redis.call('HGET', K[11], id)
      local seq, slots
      if info then
        local s, p, k = string.match(info, '^(%d+),(-?%d+),(%d+),')
        seq, slots = tonumber(s), tonumber(k)
        a.prio = p -- (a field in a multiple assignment trips the embedded store's Lua)
        a.seqs = s -- its decimal form, for the writes (a number is formatted with %.14g each time)
        a.labels = string.match(info, '^[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,(.*)$') or ''
      else
        -- not indexed (submitted before the index existed, or not WAITING)
        seq = tonumber(redis.call('ZSCORE', K[4], id) or '')
        if seq then
          local r = redis.call('HMGET', a.key, 'slots', 'labels', 'priority')
          slots, a.labels = tonumber(r[1] or '1'), r[2] or ''
          a.prio = r[3]
        end
      end
      if not seq then
        local r = redis.call('HMGET', a.key, 'state', 'group')
        if not r[1] or r[2] ~= A[3] then
          return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. A[3])
        end
        return redis.error_reply('WS_BAD_STATE ' .. kind .. ' run ' .. id .. ': run is ' .. r[1] .. ', want WAITING')
      end
      if seq < covered then
        return redis.error_reply('WS_BAD_STATE ' .. kind .. ' run ' .. id .. ': covered by the group\'s discard_below ' .. covered)
      end
      a.seq, a.slots, a.st = seq, slots or 1, 'WAITING'
      a.seqs = a.seqs or string.format('%d', seq)
    elseif kind == 'stop' then
      local r = redis.call('HMGET', a.key, 'state', 'group')
      if not r[1] or r[2] ~= A[3] then
        return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. A[3])
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
    S.settled[#S.settled + 1] = A[3]
    if A[17] ~= '0' then set_wake(K, A, S.now()) end
    return {tonumber(g[1]), 0}
  end
  local now = S.now()
  set_wake(K, A, now)
  local hist = {}
  local counts = {launch = 0, discard = 0, stop = 0}
  local ev, notify, gone, finished = {}, {}, {}, false
  local free, queued = nil, 0
  local place = A[16] == '1'
  -- the decision record of each run the decision names, one field:
  -- claim, epoch, decided_at, action, policy, policy version, sha256,
  -- registry version, reason (0x1f-separated; storage.parseDecision)
  local nows = string.format('%d', now)
  local dhead = A[5] .. '\31' .. A[1] .. '\31' .. nows .. '\31'
  local dtail = '\31' .. A[6] .. '\31' .. A[7] .. '\31' .. A[11] .. '\31' .. A[12] .. '\31'
  for _, a in ipairs(acts) do
    counts[a.kind] = counts[a.kind] + 1
    local dec = dhead .. a.kind .. dtail .. a.reason
    if a.kind == 'launch' then
      hist[#hist + 1] = nows .. ',' .. a.labels
      gone[#gone + 1] = a.id
      redis.call('ZREM', K[4], a.id)
      redis.call('ZADD', K[5], a.seqs, a.id)
      ev[#ev + 1] = 'LAUNCHED#' .. A[3] .. '#' .. a.id
      local got
      if place then
        S.free = S.free or free_cursor(K[14], K[12], K[13], now, math.min(S.need + 4, 64), true)
        free = S.free
        got = free.take(a.slots)
        place = got ~= nil -- the first misfit queues, and every launch after it
      end
      -- policy and policy_version are the launching decision's (a later
      -- stop decision only replaces dec)
      if got then
        local as = {}
        for task, s in ipairs(got) do
          as[#as + 1] = claim_slot(K[13], K[14], S.tok, s, a.id, task - 1, now, S.taken)
        end
        redis.call('HSET', a.key, 'dec', dec, 'state', 'RUNNING', 'launched_at', nows, 'started_at', nows,
          'assign', join_assign(as), 'policy', A[6], 'policy_version', A[7])
        notify[#notify + 1] = as[1].w .. '#' .. as[1].i .. '#' .. a.id
        ev[#ev + 1] = 'RUNNING#' .. A[3] .. '#' .. a.id
      else
        redis.call('HSET', a.key, 'dec', dec, 'state', 'LAUNCHED', 'launched_at', nows, 'policy', A[6], 'policy_version', A[7])
        redis.call('ZADD', K[7], a.seqs, a.id)
        redis.call('HSET', K[19], a.id, a.seqs .. ',' .. string.format('%d', a.slots) .. ',' .. (a.prio or '0') .. ',' .. nows .. ',' ..
          A[3] .. ',' .. a.labels)
        queued = queued + 1
      end
    elseif a.kind == 'discard' then
      redis.call('HSET', a.key, 'dec', dec, 'state', 'DISCARDED', 'finished_at', nows, 'reason', a.reason)
      gone[#gone + 1] = a.id
      redis.call('ZREM', K[4], a.id)
      redis.call('ZADD', K[9], nows, a.id)
      finished = true
      ev[#ev + 1] = 'DISCARDED#' .. A[3] .. '#' .. a.id
    elseif a.st == 'LAUNCHED' then
      redis.call('HSET', a.key, 'dec', dec, 'state', 'STOPPED', 'finished_at', nows, 'reason', a.reason)
      redis.call('ZADD', K[9], nows, a.id)
      redis.call('ZREM', K[5], a.id)
      redis.call('ZREM', K[7], a.id)
      redis.call('HDEL', K[19], a.id)
      finished = true
      ev[#ev + 1] = 'STOPPED#' .. A[3] .. '#' .. a.id
    else
      redis.call('HSET', a.key, 'dec', dec, 'state', 'STOPPING', 'reason', a.reason)
      ev[#ev + 1] = 'STOPPING#' .. A[3] .. '#' .. a.id
    end
  end
  if #gone > 0 then
    redis.call('HDEL', K[11], unpack(gone))
  end
  local keep = tonumber(A[21]) or 0
  if keep > 0 and #hist > 0 then
    if g[4] ~= '1' then redis.call('HSET', K[3], 'hist', '1') end
    local hl = redis.call('LPUSH', K[17], unpack(hist))
    if hl > 2 * keep then redis.call('LTRIM', K[17], 0, keep - 1) end
  elseif keep == 0 and g[4] == '1' then
    redis.call('HDEL', K[3], 'hist')
    redis.call('DEL', K[17])
  end
  if finished then
    redis.call('ZADD', K[16], 'NX', nows, A[3])
  end
  for _, e in ipairs(ev) do S.ev[#S.ev + 1] = e end
  for _, e in ipairs(notify) do S.notify[#S.notify + 1] = e end
  local kept = math.max(tonumber(A[13]) or 20, 1)
  local dl = redis.call('LPUSH', K[10], table.concat({nows, A[5], A[1], A[6], A[7], A[12],
    string.format('%d\31%d\31%d\31%d', counts.launch, counts.discard, counts.stop, below)}, '\31'))
  if dl > 2 * kept then
    redis.call('LTRIM', K[10], 0, kept - 1)
  end
  if below > covered then
    redis.call('HSET', K[3], 'discard_below', string.format('%d', below), 'discard_reason', A[9])
    redis.call('SADD', K[8], A[3])
  end
  local v = tonumber(g[1]) + 1
  local vs = string.format('%d', v)
  -- dv: the version this apply left when the leader keeps the view it
  -- left (a report one version later hands back a reference to it:
  -- report.lua), else none
  -- (with the view's gap: "version,lo,hi,oldest,newest", report.lua)
  local dv = ''
  if A[22] == '1' then
    dv = vs
  elseif string.sub(A[22], 1, 2) == '1,' then
    dv = vs .. string.sub(A[22], 2)
  end
  redis.call('HSET', K[3], 'version', vs, 'last_claim', A[5], 'dv', dv)
  if A[10] ~= '1' then
    S.settled[#S.settled + 1] = A[3]
  end
  return {v, queued}
end

-- the call's groups, each in apply_one's layout
local gk, ga = 13, 9 -- the next group's first key and arg
local calls = {}
while ga <= #ARGV do
  local n = tonumber(ARGV[ga])
  if not n or n < 0 or ga + 14 + 3 * n > #ARGV or gk + 6 + n > #KEYS then
    return redis.error_reply('WS_INVALID apply: group ' .. #calls + 1 .. ' has ' .. tostring(ARGV[ga]) ..
      ' actions; the keys or args do not match')
  end
  local K = {KEYS[1], KEYS[2], KEYS[gk], KEYS[gk + 1], KEYS[gk + 2], KEYS[3], KEYS[4], KEYS[5], KEYS[gk + 3],
    KEYS[gk + 4], KEYS[gk + 5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[gk + 6], KEYS[11], KEYS[12]}
  for j = 1, n do K[19 + j] = KEYS[gk + 6 + j] end
  local A = {ARGV[1], ARGV[2], ARGV[ga + 1], ARGV[ga + 2], ARGV[ga + 3], ARGV[ga + 4], ARGV[ga + 5], ARGV[ga + 6],
    ARGV[ga + 7], ARGV[ga + 8], ARGV[ga + 9], ARGV[ga + 10], ARGV[3], ARGV[4], ARGV[5], ARGV[ga + 11], ARGV[ga + 12],
    ARGV[6], ARGV[7], ARGV[8], ARGV[ga + 13], ARGV[ga + 14]}
  for j = 1, 3 * n do A[22 + j] = ARGV[ga + 14 + j] end
  calls[#calls + 1] = {K, A, n}
  for j = 1, n do
    if A[20 + 3 * j] == 'launch' then S.need = S.need + 1 end
  end
  gk, ga = gk + 7 + n, ga + 15 + 3 * n
end
if gk ~= #KEYS + 1 then
  return redis.error_reply('WS_INVALID apply: ' .. (#KEYS + 1 - gk) .. ' keys left over')
end
local out = {}
for i, c in ipairs(calls) do
  -- a group's command failing at run time (a corrupt key) is that group's
  -- error: the groups after it are applied and the call's shared writes
  -- below are made for every group (what the failed group wrote before
  -- the failure stays: a script does not roll back)
  local done, r = pcall(apply_one, c[1], c[2], c[3])
  if done then
    out[i] = r
  else
    out[i] = caught(r)
  end
end
if #S.settled > 0 then
  call_many('SREM', KEYS[3], S.settled) -- out of dirty: one SREM for the call's groups
end
call_many('ZREM', KEYS[8], S.taken) -- the slots placed on: out of free in one ZREM
publish_runs(ARGV[4], S.ev)
if #S.notify > 0 then
  redis.call('PUBLISH', ARGV[5], table.concat(S.notify, ' '))
end
if S.timer then
  redis.call('PUBLISH', ARGV[6], '#timer') -- storage.TimerEvent
end
return out
