-- report: task-0 workers report their runs' outcomes (worker write,
-- token-guarded). One call carries the reports of one worker (ReportBatch
-- sends a pipeline's reports as a few calls of up to 32): the clock, each
-- slot owner's draining check and the call's shared writes are read and
-- made once a call (the freed slots back into free in one ZADD, the
-- groups into dirty in one SADD and into retire in one ZADD NX, the runs
-- out of restore in one SREM, one PUBLISH of the run events, one PUBLISH
-- on the work channel of every reported group's message, 0x1c-separated
-- (storage.SplitWorkEvents)); each report is checked and written on its
-- own (its error leaves it alone and the others go on).
-- KEYS (shared): [1] slots hash, [2] free zset, [3] retire zset, [4]
-- restore set, [5] dirty set, [6] timers zset, [7] the policy registry
-- generation (Keys.PolicyGen); then per report: the run
-- hash, its group's hash, active zset, finished zset (retention index),
-- waiting zset, waiting-run index (Keys.WaitInfo) and delayed zset
-- ARGV (shared): [1] worker identity, [2] work channel (the coordinator
-- wakes; advisory), [3] run-events channel (publish_runs: each run's new
-- state), [4] the default window (limits.DefaultWindow); then per report:
-- run id, token, outcome (SUCCEEDED|FAILED|STOPPED), reason, group, the
-- run's result ('' = none), the tail of its output, its exit code ('' =
-- none): each written only when given (the attempt's, also on a retry)
-- report_one reads a report's keys and args where the call has them
-- (KEYS[k + 1..k + 7], ARGV[a + 1..a + 8]: no table of its own; the
-- shared ones from KEYS[1..6] and ARGV[1..4]).
-- A group's message (the last of its reports in the call) is its next
-- snapshot when the group has no active run left, a small window (at most
-- 64 runs, all indexed)
-- and no launch history (hist: its snapshot carries launches):
-- "group<US>policy<US>max_active<US>version<US>window<US>
-- discard_below<US>gen<US>now<US>waiting_total<US>n_oldest<US>Pparams"
-- then "<US>id<RS>index entry" per window run (storage.ParseWorkEvent); the
-- leader decides from it without a snapshot script (the apply's version
-- check makes it safe). When nothing but this report changed the group
-- since the leader's last apply (its dv, written by apply.lua, is the
-- version before this report's), no wake is pending and no launch history
-- is kept, the message is the reference "group<US>=version<US>now"
-- instead (storage.ParseWorkRef): the leader has that snapshot already
-- (what it decided, less what the decision took), at this version with no
-- active run. For a view of a truncated window (dv "v,lo,hi,oldest,newest",
-- storage.ViewGap) the reference goes on with the runs of the window's gap
-- the next window shows, "<US>id<RS>index entry" each (gap_entries). A group left with nothing to decide (below: it stays out
-- of dirty) sends "group<US>-" (storage.QuietWorkEvent: the slot manager
-- and retention wake, the coordinator need not). Otherwise it is the
-- group's name. When the call hands back
-- a snapshot or a reference, its message starts with "#gen=N", the policy
-- registry generation at the report (storage.ParseWorkGen): a leader
-- that holds that generation decides the handed-back groups without
-- reading dirty or the generation again.
-- Retries: a FAILED outcome of a run with attempts left (attempt <
-- max_attempts) is not final: the run goes back to WAITING under its id,
-- attempt+1, not_before = now + backoff (retry_at), parked in the delayed
-- zset (park; one more PUBLISH of storage.TimerEvent), its slots released
-- as for a final report; reason says which attempt failed. A run with
-- max_attempts > 1 records every attempt in its attempts field
-- (attempt_log). A STOPPED run is never retried.
-- returns: per report, in order, 1 (0 = replay of an accepted report,
-- nothing written) or its error reply
-- errors (per report, nothing written for it): WS_NOT_FOUND, WS_INVALID,
-- WS_NOT_OWNER (not the task-0 worker + token), WS_BAD_STATE (run not
-- RUNNING/STOPPING); WS_INVALID (the whole call, nothing written: the
-- keys and args do not match)
-- writes: state, finished_at, reason (not an empty one where the run has
-- none: no retries, no stop requested), report_token; releases every slot of
-- the run whose value is still run#token#task; removes from active and
-- restore (a RUNNING or STOPPING run is never in launched); group
-- version+1, dirty (not when the group is left with no active run, none
-- waiting and no wake pending: a decision could do nothing; its message
-- is then its name); the group into retire (unless there). The reports
-- run under pcall: a command failing halfway still leaves the shared
-- writes of the reports before it made (the call then fails; a retry
-- replays them).
-- replay: a retried report finds report_token == token on the final run and returns 0.
-- A STOPPING run always ends STOPPED (the state machine has no other way
-- out of STOPPING): a SUCCEEDED or FAILED report for it is recorded as
-- STOPPED, the reported outcome kept in the reason.
-- bound: O(r · (k + log n)), r reports, k the slots of each run, n its group's waiting runs (a window of at most 64 read)
local S = {drain = {}, free = {}, dirty = {}, quiet = {}, retire = {}, restore = {}, ev = {}, msg = {}, timer = false}
-- the clock, read once a call; S.nows its decimal form (numbers passed to
-- redis.call or concatenated are formatted with %.14g each time: slower)
function S.now()
  if not S.t then S.t = now_ms(); S.nows = string.format('%d', S.t) end
  return S.t
end
-- gap_entries: the runs a view of a truncated window lacks (dv's gap
-- ",lo,hi,oldest,newest", storage.ViewGap): the first oldest and the last
-- newest WAITING runs with lo < seq < hi, each "<US>id<RS>index entry", in
-- seq order (storage.ParseWorkRef); nil when one is not indexed or the
-- gap does not parse (the report then hands back the snapshot).
local function gap_entries(kwaiting, kinfo, gap)
  local lo, hi, a, b = string.match(gap, '^,(%d+),(%d+),(%d+),(%d+)$')
  if not lo then return nil end
  a, b = tonumber(a), tonumber(b)
  local ids = {}
  if a > 0 then ids = redis.call('ZRANGEBYSCORE', kwaiting, '(' .. lo, '(' .. hi, 'LIMIT', 0, a) end
  if b > 0 then
    local seen = {}
    for _, id in ipairs(ids) do seen[id] = true end
    local nw = redis.call('ZREVRANGEBYSCORE', kwaiting, '(' .. hi, '(' .. lo, 'LIMIT', 0, b)
    for i = #nw, 1, -1 do
      if not seen[nw[i]] then ids[#ids + 1] = nw[i] end
    end
  end
  if #ids == 0 then return '' end
  local info = redis.call('HMGET', kinfo, unpack(ids))
  local parts = {''}
  for i, id in ipairs(ids) do
    if not info[i] then return nil end
    parts[#parts + 1] = id .. '\30' .. info[i]
  end
  return table.concat(parts, '\31')
end
local produced = {'result', 'output', 'exit_code'}
-- report_one writes report j (its keys from KEYS[k + 1], its args from
-- ARGV[a + 1]; salt spreads its retry's jitter)
local function report_one(k, a, salt)
  local krun, kgroup, kactive, kfin, kwait, kinfo, kdel = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4],
    KEYS[k + 5], KEYS[k + 6], KEYS[k + 7]
  local id, tok, o, given, group = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
  if o ~= 'SUCCEEDED' and o ~= 'FAILED' and o ~= 'STOPPED' then
    return redis.error_reply('WS_INVALID outcome ' .. o .. ' (want SUCCEEDED, FAILED or STOPPED)')
  end
  local r = redis.call('HMGET', krun, 'state', 'group', 'assign', 'report_token', 'attempt', 'max_attempts')
  if not r[1] or r[2] ~= group then
    return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' does not exist')
  end
  if r[4] and r[4] == tok then return 0 end
  local as = parse_assign(r[3])
  local owner = false
  for _, x in ipairs(as) do
    if x.task == 0 and x.w == ARGV[1] and x.tok == tok then owner = true end
  end
  if not owner then
    return redis.error_reply('WS_NOT_OWNER worker ' .. ARGV[1] .. ' token ' .. tok .. ' does not hold task 0 of run ' .. id)
  end
  if r[1] ~= 'RUNNING' and r[1] ~= 'STOPPING' then
    return redis.error_reply('WS_BAD_STATE report run ' .. id .. ': run is ' .. r[1] .. ', want RUNNING or STOPPING')
  end
  local reason = given
  if r[1] == 'STOPPING' and o ~= 'STOPPED' then
    reason = 'stop requested; the run had already finished ' .. o .. (reason ~= '' and (': ' .. reason) or '')
    o = 'STOPPED'
  end
  local fin = S.now()
  local att, maxa = tonumber(r[5]) or 1, tonumber(r[6]) or 1
  if maxa > 1 then -- a run with retries: its backoff and attempt log too
    local x = redis.call('HMGET', krun, 'backoff', 'started_at', 'attempts')
    r[7], r[8], r[9] = x[1], x[2], x[3]
  end
  local retry = o == 'FAILED' and retry_at(att, maxa, r[7], fin, salt)
  -- the fields written with the new state (in its one HSET): the attempt's
  -- record (runs with retries) and what it produced
  local hist = {}
  if maxa > 1 then
    hist = {'attempts', attempt_log(r[9], att, ARGV[1], r[8], fin, o, reason)}
  end
  for j, f in ipairs(produced) do
    local v = ARGV[a + 5 + j]
    if v and v ~= '' then hist[#hist + 1] = f; hist[#hist + 1] = v end
  end
  if retry then
    redis.call('HSET', krun, 'state', 'WAITING', 'attempt', att + 1, 'not_before', string.format('%d', retry),
      'reason', 'attempt ' .. att .. ' of ' .. maxa .. ' failed' .. (reason ~= '' and (': ' .. reason) or ''),
      'report_token', tok, unpack(hist))
    redis.call('HDEL', krun, 'assign', 'launched_at', 'started_at', 'require', 'progress')
    park(kdel, KEYS[6], group, id, retry)
    S.timer = true -- one PUBLISH of storage.TimerEvent for the call
    o = 'WAITING'
  else
    -- (no reason given, none to replace: none written; a run with retries
    -- or a stop requested has one to replace)
    if reason ~= '' or maxa > 1 or r[1] == 'STOPPING' then
      hist[#hist + 1] = 'reason'
      hist[#hist + 1] = reason
    end
    redis.call('HSET', krun, 'state', o, 'finished_at', S.nows, 'report_token', tok, unpack(hist))
    redis.call('ZADD', kfin, S.nows, id)
    add_once(S.retire, group)
  end
  release_slots(KEYS[1], KEYS[2], id, as, S)
  redis.call('ZREM', kactive, id)
  S.restore[#S.restore + 1] = id
  local v = redis.call('HINCRBY', kgroup, 'version', '1')
  local msg = group
  -- (no active run left: what the group's message can be is read, the
  -- three fields a reference needs first: wake_at, hist, dv)
  local gq = redis.call('ZCARD', kactive) == 0 and redis.call('HMGET', kgroup, 'wake_at', 'hist', 'dv')
  if gq and not gq[1] and redis.call('ZCARD', kwait) == 0 then
    -- nothing left to decide: no active run, none waiting, no wake
    -- pending; the group stays out of dirty (a decision could launch,
    -- discard or stop nothing) and its message says so (the slot
    -- manager and retention wake)
    gq = nil
    S.quiet[group] = true
    msg = group .. '\31-' -- storage.QuietWorkEvent: nothing to decide
  else
    S.quiet[group] = false
  end
  add_once(S.dirty, group) -- (the group's last report in the call says whether it goes into dirty)
  local dv, gap
  if gq then dv, gap = string.match(gq[3] or '', '^(%d+)(.*)$') end
  local ref = gq and tonumber(dv or '') == v - 1 and gq[2] ~= '1' and not gq[1]
  if ref then
    -- only this report changed the group since the leader's apply (dv), no
    -- launch history, no wake pending: the leader's own view of it, at
    -- version v, with no active run (and, for a view of a truncated
    -- window, the runs of its gap the next window shows)
    local e = gap == '' and '' or gap_entries(kwait, kinfo, gap)
    if e then
      msg = group .. '\31=' .. string.format('%d', v) .. '\31' .. S.nows .. e
      S.handback = true
    else
      ref = false -- the gap's runs are not all indexed: the snapshot below
    end
  end
  if ref then
    -- the reference above
  elseif gq then
    local g, total, oldest, ids = window_of(kgroup, kwait, tonumber(ARGV[4]))
    if g[1] and g[7] ~= '1' and g[10] ~= '1' and #ids <= 64 then
      local info = #ids > 0 and redis.call('HMGET', kinfo, unpack(ids)) or {}
      local parts = {group, g[1], g[2] or '', g[3] or '', g[4] or '', g[5] or '', g[6] or '', S.nows, total, oldest,
        'P' .. (g[8] or '')}
      for i, id in ipairs(ids) do
        if not info[i] then parts = nil break end -- not indexed: the leader reads a snapshot
        parts[#parts + 1] = id .. '\30' .. info[i]
      end
      if parts then msg = table.concat(parts, '\31'); S.handback = true end
    end
  end
  -- a group's last report in the call names its message (an earlier one
  -- is out of date by then)
  local at = S.msg[group]
  if not at then at = #S.msg + 1; S.msg[group] = at end
  S.msg[at] = msg
  S.ev[#S.ev + 1] = o .. '#' .. group .. '#' .. id
  return 1
end

-- the layout first, whole (nothing is written for a call that does not match it)
local nrep = (#ARGV - 4) / 8
if nrep ~= math.floor(nrep) or #KEYS ~= 7 + 7 * nrep then
  return redis.error_reply('WS_INVALID report: ' .. #KEYS .. ' keys and ' .. #ARGV .. ' args do not make whole reports')
end
local out = {}
local done, err = pcall(function()
  for j = 1, nrep do
    out[j] = report_one(7 + 7 * (j - 1), 4 + 8 * (j - 1), j)
  end
end)
if #S.free > 0 then redis.call('ZADD', KEYS[2], unpack(S.free)) end
if #S.retire > 0 then
  local z = {}
  for _, g in ipairs(S.retire) do z[#z + 1] = S.nows; z[#z + 1] = g end
  redis.call('ZADD', KEYS[3], 'NX', unpack(z))
end
if #S.restore > 0 then redis.call('SREM', KEYS[4], unpack(S.restore)) end
local dirty = {}
for _, g in ipairs(S.dirty) do
  if not S.quiet[g] then dirty[#dirty + 1] = g end
end
if #dirty > 0 then redis.call('SADD', KEYS[5], unpack(dirty)) end
if S.timer then redis.call('PUBLISH', ARGV[2], '#timer') end -- storage.TimerEvent
if #S.msg > 0 then
  if S.handback then
    -- the generation the handed-back groups were reported at: first
    table.insert(S.msg, 1, '#gen=' .. (redis.call('GET', KEYS[7]) or '0'))
  end
  redis.call('PUBLISH', ARGV[2], table.concat(S.msg, '\28'))
end
publish_runs(ARGV[3], S.ev)
if not done then
  return caught(err)
end
return out
