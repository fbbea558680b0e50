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
-- named run's new state), [5] the slot-events channels' prefix (the
-- task-0 slot of each run placed here, on its worker's channel:
-- publish_slots), [6] work channel (a wake PUBLISHes
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
-- A group's requirements (its hash field require; its field same = '1'
-- adds the flag "@same=1": all of a run's slots on one worker; its field
-- prefer its preferences "~k=weight:v": _lib.lua take_pref), and a run's
-- own (its field rreq, read when the group's rreq says it has runs with
-- some) go with each launch: a
-- launch takes only slots of workers that carry them and serve the group
-- (_lib.lua Placement; the run gets require, for allocate_batch and
-- restore_apply).
-- Placing (place = '1' and the launched zset empty when the call's first
-- launch is placed, but for the LAUNCHED runs its decision stops: no
-- launch overtakes a LAUNCHED run that waits for slots, whatever the
-- leader's view of the queue; the leader also passes '0' while it knows
-- one waits): each launch takes all of its slots on
-- live workers at once (as allocate_batch: RUNNING, started_at =
-- launched_at, assign, a fresh token per slot, one slot-events message a
-- worker placed on);
-- from the first launch that does not fit on, the launches queue in
-- launched (LAUNCHED) for the slot manager, in order (the later groups'
-- of the call too). Each launch goes on
-- the launches list ("launched_ms,labels", one LPUSH per decision; trimmed
-- to the launches kept once twice as long) when launches kept > 0, and the group gets
-- hist = 1 (snapshots read the list, reports hand back no snapshot).
-- A decision is complete for its snapshot: the group is not re-marked
-- dirty here (but for again); only a change from outside a decision
-- (submit, report, fail_run, request_stop, set_group) marks it dirty again
-- (README.md "Dirty contract").
-- bound: O(n · (log m + k) + f), n actions (at most the snapshot's runs plus
-- one), k slots each, f free-zset entries read (free_cursor)
-- apply_one reads a group's keys and args where the call has them
-- (KEYS[gk..gk + 6 + n], ARGV[ga + 1..ga + 14 + 3n], in the layout above;
-- no table of its own), the shared ones from KEYS[1..12] and ARGV[1..8].
-- S: what the groups of one call share (the clock, read once; the free
-- cursor with its worker-liveness cache; the batch's launch count, for
-- the cursor's window; open: whether a launch may take free slots (no
-- LAUNCHED run waits: one ZCARD a call, false once a launch queues); the
-- token counter, one INCR; the groups leaving
-- dirty, one SREM; the run events, one PUBLISH for the call; the slot
-- announcements, one PUBLISH a worker placed on)
local S = {need = 0, ev = {}, notify = {}, tok = {key = KEYS[9], n = 0}, settled = {}, taken = {}}
function S.now()
  S.t = S.t or now_ms()
  return S.t
end
local function set_wake(kgroup, group, wake, now)
  local w = tonumber(wake) or 0
  if w <= 0 then return end
  w = math.min(math.max(w, now + tonumber(ARGV[7])), now + tonumber(ARGV[8]))
  local cur = tonumber(redis.call('HGET', kgroup, 'wake_at') or '')
  if cur and cur <= w then return end
  local ws = string.format('%d', w)
  redis.call('HSET', kgroup, 'wake_at', ws)
  redis.call('ZADD', KEYS[11], 'LT', ws, group)
  S.timer = true -- one PUBLISH of storage.TimerEvent for the call
end
-- apply_one applies one group's decision: its keys from KEYS[gk], its
-- args from ARGV[ga + 1], n its actions; returns {version, queued} or an
-- error reply (nothing written for the group).
local function apply_one(gk, ga, n)
  local kgroup, kwait, kactive, kfin, kdec, kinfo, klaunches = KEYS[gk], KEYS[gk + 1], KEYS[gk + 2], KEYS[gk + 3],
    KEYS[gk + 4], KEYS[gk + 5], KEYS[gk + 6]
  local group, version, claim, policy, pversion, below_a, breason, again, sha, registry, place_a, wake, keep_a, view =
    ARGV[ga + 1], ARGV[ga + 2], ARGV[ga + 3], ARGV[ga + 4], ARGV[ga + 5], ARGV[ga + 6], ARGV[ga + 7], ARGV[ga + 8],
    ARGV[ga + 9], ARGV[ga + 10], ARGV[ga + 11], ARGV[ga + 12], ARGV[ga + 13], ARGV[ga + 14]
  local below = tonumber(below_a) or 0
  local g = redis.call('HMGET', kgroup, 'version', 'last_claim', 'discard_below', 'hist', 'require', 'rreq', 'same', 'prefer')
  if not g[1] then
    return redis.error_reply('WS_NOT_FOUND group ' .. group .. ' does not exist')
  end
  if claim ~= '' and g[2] == claim then
    return redis.error_reply('WS_DUP claim ' .. claim .. ' already applied to group ' .. group)
  end
  if g[1] ~= version then
    return redis.error_reply('WS_STALE group ' .. group .. ' is at version ' .. g[1] .. ', decision made at ' .. version)
  end
  local covered = tonumber(g[3]) or 0
  -- (tables cost a script: none for the one-action decision's duplicate
  -- check, and each action's made whole at once, no rehash as it fills)
  local seen, acts = n > 1 and {} or nil, {}
  local lstop = 0 -- the LAUNCHED runs the decision stops, not yet stopped (they wait for slots no more)
  for j = 1, n do
    local kind, id, reason = ARGV[ga + 12 + 3 * j], ARGV[ga + 13 + 3 * j], ARGV[ga + 14 + 3 * j]
    if seen then
      if seen[id] then
        return redis.error_reply('WS_INVALID two actions on run ' .. id)
      end
      seen[id] = true
    end
    local a = {kind = kind, id = id, reason = reason, key = KEYS[gk + 6 + j], prio = false, seqs = false, labels = '',
      seq = 0, slots = 1, st = false}
    if kind == 'launch' or kind == 'discard' then
      -- a WAITING run of this group is in its index: seq and slots at once
      local info = redis.call('HGET', kinfo, id)
      local seq, slots
      if info then
        local s, p, k, rest = string.match(info, '^(%d+),(-?%d+),(%d+),[^,]*(.*)$')
        seq, slots = tonumber(s), tonumber(k)
        a.prio = p -- (a field in a multiple assignment trips the embedded store's Lua)
        a.seqs = s -- its decimal form, for the writes (a number is formatted with %.14g each time)
        -- the labels: after attempt, max_attempts and not_before (winfo)
        a.labels = rest ~= '' and string.match(rest, '^,[^,]*,[^,]*,[^,]*,(.*)$') or ''
      else
        -- not indexed (submitted before the index existed, or not WAITING)
        seq = tonumber(redis.call('ZSCORE', kwait, id) or '')
        if seq then
          local r = redis.call('HMGET', a.key, 'slots', 'labels', 'priority')
          slots, a.labels = tonumber(r[1] or '1'), r[2] or ''
          a.prio = r[3]
        end
      end
      if not seq then
        local r = redis.call('HMGET', a.key, 'state', 'group')
        if not r[1] or r[2] ~= group then
          return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. group)
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
      if not r[1] or r[2] ~= group then
        return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. group)
      end
      if r[1] ~= 'LAUNCHED' and r[1] ~= 'RUNNING' then
        return redis.error_reply('WS_BAD_STATE stop run ' .. id .. ': run is ' .. r[1] .. ', want LAUNCHED or RUNNING')
      end
      a.st = r[1]
      if a.st == 'LAUNCHED' then lstop = lstop + 1 end
    else
      return redis.error_reply('WS_INVALID unknown action kind ' .. kind)
    end
    acts[j] = a
  end
  if n == 0 and below == 0 then
    S.settled[#S.settled + 1] = group
    if wake ~= '0' then set_wake(kgroup, group, wake, S.now()) end
    return {tonumber(g[1]), 0}
  end
  local now = S.now()
  set_wake(kgroup, group, wake, now)
  local keep = tonumber(keep_a) or 0
  local hist = keep > 0 and {} or nil
  local nlaunch, ndiscard, nstop = 0, 0, 0
  -- the run events and slot announcements go straight into the call's
  -- lists (what a failing command leaves written is announced too)
  local ev, notify, gone, finished = S.ev, S.notify, {}, false
  local free, queued = nil, 0
  local place = place_a == '1'
  -- the decision record of each run the decision names, one field:
  -- claim, epoch, decided_at, action, policy, policy version, sha256,
  -- registry version, reason (0x1f-separated; storage.parseDecision)
  local nows = string.format('%d', now)
  local dhead = claim .. '\31' .. ARGV[1] .. '\31' .. nows .. '\31'
  local dtail = '\31' .. policy .. '\31' .. pversion .. '\31' .. sha .. '\31' .. registry .. '\31'
  for _, a in ipairs(acts) do
    local dec = dhead .. a.kind .. dtail .. a.reason
    if a.kind == 'launch' then
      nlaunch = nlaunch + 1
      if hist then hist[#hist + 1] = nows .. ',' .. a.labels end
      gone[#gone + 1] = a.id
      redis.call('ZREM', kwait, a.id)
      redis.call('ZADD', kactive, a.seqs, a.id)
      ev[#ev + 1] = 'LAUNCHED#' .. group .. '#' .. a.id
      local got
      -- its requirements: its group's, and its own when its group has runs
      -- with some (rreq: submit.lua; a key in both: the run's value)
      local req = g[5] or ''
      if g[7] == '1' then req = merge_req(req, '@same=1') end -- each run's slots on one worker
      if g[8] then req = merge_req(req, g[8]) end -- its preferences ("~k=weight:v")
      if g[6] == '1' then
        local own = redis.call('HGET', a.key, 'rreq')
        if own and own ~= '' then req = merge_req(req, own) end
      end
      if place and S.open == nil then S.open = redis.call('ZCARD', KEYS[4]) <= lstop end
      if place and S.open then
        S.C = S.C or {kfree = KEYS[8], kworkers = KEYS[6], kslots = KEYS[7], now = now, win = math.min(S.need + 4, 64),
          P = placement(KEYS[8]), by = {}}
        free = cursor_for(S.C, group, req)
        got = free.take(a.slots)
        place = got ~= nil -- the first misfit queues, and every launch after it
      end
      -- policy and policy_version are the launching decision's (a later
      -- stop decision only replaces dec)
      if got then
        local as = {}
        for task, s in ipairs(got) do
          as[#as + 1] = claim_slot(KEYS[7], KEYS[8], S.tok, s, a.id, task - 1, now, S.taken)
        end
        redis.call('HSET', a.key, 'dec', dec, 'state', 'RUNNING', 'launched_at', nows, 'started_at', nows,
          'assign', join_assign(as), 'policy', policy, 'policy_version', pversion)
        if req ~= '' then redis.call('HSET', a.key, 'require', req) end
        slot_note(notify, as[1], a.id)
        ev[#ev + 1] = 'RUNNING#' .. group .. '#' .. a.id
      else
        redis.call('HSET', a.key, 'dec', dec, 'state', 'LAUNCHED', 'launched_at', nows, 'policy', policy, 'policy_version', pversion)
        if req ~= '' then redis.call('HSET', a.key, 'require', req) end
        redis.call('ZADD', KEYS[4], a.seqs, a.id)
        S.open = false -- a queued launch: none after it in the call passes it
        redis.call('HSET', KEYS[12], a.id, a.seqs .. ',' .. string.format('%d', a.slots) .. ',' .. (a.prio or '0') .. ',' .. nows .. ',' ..
          group .. ',' .. a.labels .. (req ~= '' and ('\30' .. req) or ''))
        queued = queued + 1
      end
    elseif a.kind == 'discard' then
      ndiscard = ndiscard + 1
      redis.call('HSET', a.key, 'dec', dec, 'state', 'DISCARDED', 'finished_at', nows, 'reason', a.reason)
      gone[#gone + 1] = a.id
      redis.call('ZREM', kwait, a.id)
      redis.call('ZADD', kfin, nows, a.id)
      finished = true
      ev[#ev + 1] = 'DISCARDED#' .. group .. '#' .. a.id
    elseif a.st == 'LAUNCHED' then
      nstop = nstop + 1
      redis.call('HSET', a.key, 'dec', dec, 'state', 'STOPPED', 'finished_at', nows, 'reason', a.reason)
      redis.call('ZADD', kfin, nows, a.id)
      redis.call('ZREM', kactive, a.id)
      redis.call('ZREM', KEYS[4], a.id)
      redis.call('HDEL', KEYS[12], a.id)
      lstop = lstop - 1
      finished = true
      ev[#ev + 1] = 'STOPPED#' .. group .. '#' .. a.id
    else
      nstop = nstop + 1
      redis.call('HSET', a.key, 'dec', dec, 'state', 'STOPPING', 'reason', a.reason)
      ev[#ev + 1] = 'STOPPING#' .. group .. '#' .. a.id
    end
  end
  if #gone > 0 then
    redis.call('HDEL', kinfo, unpack(gone))
  end
  if hist and #hist > 0 then
    if g[4] ~= '1' then redis.call('HSET', kgroup, 'hist', '1') end
    local hl = redis.call('LPUSH', klaunches, unpack(hist))
    if hl > 2 * keep then redis.call('LTRIM', klaunches, 0, keep - 1) end
  elseif keep == 0 and g[4] == '1' then
    redis.call('HDEL', kgroup, 'hist')
    redis.call('DEL', klaunches)
  end
  if finished then
    redis.call('ZADD', KEYS[10], 'NX', nows, group)
  end
  local kept = math.max(tonumber(ARGV[3]) or 20, 1)
  -- (one concatenation, no table: the summary is one string a decision)
  local dl = redis.call('LPUSH', kdec, nows .. '\31' .. claim .. '\31' .. ARGV[1] .. '\31' .. policy .. '\31' .. pversion ..
    '\31' .. registry .. string.format('\31%d\31%d\31%d\31%d', nlaunch, ndiscard, nstop, below))
  if dl > 2 * kept then
    redis.call('LTRIM', kdec, 0, kept - 1)
  end
  if below > covered then
    redis.call('HSET', kgroup, 'discard_below', string.format('%d', below), 'discard_reason', breason)
    redis.call('SADD', KEYS[5], group)
  end
  local v = tonumber(g[1]) + 1
  local vs = string.format('%d', v)
  -- dv: the version this apply left when the leader keeps the view it
  -- left (a report one version later hands back a reference to it:
  -- report.lua), else none
  -- (with the view's gap: "version,lo,hi,oldest,newest", report.lua)
  local dv = ''
  if view == '1' then
    dv = vs
  elseif string.sub(view, 1, 2) == '1,' then
    dv = vs .. string.sub(view, 2)
  end
  redis.call('HSET', kgroup, 'version', vs, 'last_claim', claim, 'dv', dv)
  if again ~= '1' then
    S.settled[#S.settled + 1] = group
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
  calls[#calls + 1] = {gk, ga, n}
  for j = 1, n do
    if ARGV[ga + 12 + 3 * j] == 'launch' then S.need = S.need + 1 end
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
publish_slots(ARGV[5], S.notify)
if S.timer then
  redis.call('PUBLISH', ARGV[6], '#timer') -- storage.TimerEvent
end
return out
