-- report: the task-0 worker reports a run's outcome (worker write, token-guarded).
-- KEYS[1] run hash, KEYS[2] slots hash, KEYS[3] free zset, KEYS[4] group hash,
-- KEYS[5] active zset, KEYS[6] retire zset, KEYS[7] restore set, KEYS[8] dirty set,
-- KEYS[9] the group's finished zset (retention index), KEYS[10] the group's
-- waiting zset, KEYS[11] the group's waiting-run index (Keys.WaitInfo),
-- KEYS[12] the group's delayed zset, KEYS[13] timers zset
-- ARGV[1] worker identity, ARGV[2] run id, ARGV[3] token, ARGV[4] outcome
-- (SUCCEEDED|FAILED|STOPPED), ARGV[5] reason, ARGV[6] group, ARGV[7] work
-- channel (PUBLISH of the group: the coordinator wakes; advisory), ARGV[8]
-- run-events channel (publish_runs: the run's final state), ARGV[9] the
-- default window (storage.DefaultWindow), ARGV[10] the run's result (''
-- = none), ARGV[11] the tail of its output, ARGV[12] its exit code (''
-- = none): each written only when given (the attempt's, also on a retry)
-- The work-events message carries the group's next snapshot when the group
-- has no active run left, a small window (at most 64 runs, all indexed)
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
-- active run. Otherwise it is the group's name.
-- Retries: a FAILED outcome of a run with attempts left (attempt <
-- max_attempts) is not final: the run goes back to WAITING under its id,
-- attempt+1, not_before = now + backoff (retry_at), parked in the delayed
-- zset (park; one more PUBLISH of storage.TimerEvent), its slots released
-- as for a final report; reason says which attempt failed. A run with
-- max_attempts > 1 records every attempt in its attempts field
-- (attempt_log). A STOPPED run is never retried.
-- returns: 1 (0 = replay of an accepted report, nothing written)
-- errors (nothing written): WS_NOT_FOUND, WS_INVALID, WS_NOT_OWNER (not the
-- task-0 worker + token), WS_BAD_STATE (run not RUNNING/STOPPING)
-- writes: state, finished_at, reason, report_token; releases every slot of
-- the run whose value is still run#token#task; removes from active and
-- restore (a RUNNING or STOPPING run is never in launched); group
-- version+1, dirty; the group into retire (unless there).
-- replay: a retried report finds report_token == token on the final run and returns 0.
-- A STOPPING run always ends STOPPED (the state machine has no other way
-- out of STOPPING): a SUCCEEDED or FAILED report for it is recorded as
-- STOPPED, the reported outcome kept in the reason.
-- bound: O(k + log n), k the slots of the run, n the group's waiting runs (a window of at most 64 read)
local o = ARGV[4]
if o ~= 'SUCCEEDED' and o ~= 'FAILED' and o ~= 'STOPPED' then
  return redis.error_reply('WS_INVALID outcome ' .. o .. ' (want SUCCEEDED, FAILED or STOPPED)')
end
local r = redis.call('HMGET', KEYS[1], 'state', 'group', 'assign', 'report_token', 'attempt', 'max_attempts',
  'backoff', 'started_at', 'attempts')
if not r[1] or r[2] ~= ARGV[6] then
  return redis.error_reply('WS_NOT_FOUND run ' .. ARGV[2] .. ' does not exist')
end
if r[4] and r[4] == ARGV[3] then return 0 end
local as = parse_assign(r[3])
local owner = false
for _, a in ipairs(as) do
  if a.task == 0 and a.w == ARGV[1] and a.tok == ARGV[3] then owner = true end
end
if not owner then
  return redis.error_reply('WS_NOT_OWNER worker ' .. ARGV[1] .. ' token ' .. ARGV[3] .. ' does not hold task 0 of run ' .. ARGV[2])
end
if r[1] ~= 'RUNNING' and r[1] ~= 'STOPPING' then
  return redis.error_reply('WS_BAD_STATE report run ' .. ARGV[2] .. ': run is ' .. r[1] .. ', want RUNNING or STOPPING')
end
local reason = ARGV[5]
if r[1] == 'STOPPING' and o ~= 'STOPPED' then
  reason = 'stop requested; the run had already finished ' .. o .. (reason ~= '' and (': ' .. reason) or '')
  o = 'STOPPED'
end
local fin = now_ms()
local att, maxa = tonumber(r[5]) or 1, tonumber(r[6]) or 1
local retry = o == 'FAILED' and retry_at(att, maxa, r[7], fin)
-- the fields written with the new state (in its one HSET): the attempt's
-- record (runs with retries) and what it produced
local hist = {}
if maxa > 1 then
  hist = {'attempts', attempt_log(r[9], att, ARGV[1], r[8], fin, o, reason)}
end
for j, f in ipairs({'result', 'output', 'exit_code'}) do
  local v = ARGV[9 + j]
  if v and v ~= '' then hist[#hist + 1] = f; hist[#hist + 1] = v end
end
if retry then
  redis.call('HSET', KEYS[1], 'state', 'WAITING', 'attempt', att + 1, 'not_before', string.format('%d', retry),
    'reason', 'attempt ' .. att .. ' of ' .. maxa .. ' failed' .. (reason ~= '' and (': ' .. reason) or ''),
    'report_token', ARGV[3], unpack(hist))
  redis.call('HDEL', KEYS[1], 'assign', 'launched_at', 'started_at')
  park(KEYS[12], KEYS[13], ARGV[6], ARGV[2], retry)
  redis.call('PUBLISH', ARGV[7], '#timer')
  o = 'WAITING'
else
  redis.call('HSET', KEYS[1], 'state', o, 'finished_at', fin, 'reason', reason, 'report_token', ARGV[3], unpack(hist))
  redis.call('ZADD', KEYS[9], fin, ARGV[2])
  redis.call('ZADD', KEYS[6], 'NX', fin, ARGV[6])
end
release_slots(KEYS[2], KEYS[3], ARGV[2], as)
redis.call('ZREM', KEYS[5], ARGV[2])
redis.call('SREM', KEYS[7], ARGV[2])
local v = redis.call('HINCRBY', KEYS[4], 'version', 1)
redis.call('SADD', KEYS[8], ARGV[6])
local msg = ARGV[6]
local gv = ARGV[9] and redis.call('ZCARD', KEYS[5]) == 0 and group_view(KEYS[4])
if gv and tonumber(gv[11] or '') == v - 1 and gv[10] ~= '1' and not gv[9] then
  -- only this report changed the group since the leader's apply (dv), no
  -- launch history, no wake pending: the leader's own view of it, at
  -- version v, with no active run
  msg = ARGV[6] .. '\31=' .. v .. '\31' .. fin
elseif gv then
  local g, total, oldest, ids = window_of(KEYS[4], KEYS[10], tonumber(ARGV[9]), gv)
  if g[1] and g[7] ~= '1' and g[10] ~= '1' and #ids <= 64 then
    local info = #ids > 0 and redis.call('HMGET', KEYS[11], unpack(ids)) or {}
    local parts = {ARGV[6], g[1], g[2] or '', g[3] or '', g[4] or '', g[5] or '', g[6] or '', fin, total, oldest,
      'P' .. (g[8] or '')}
    for i, id in ipairs(ids) do
      if not info[i] then parts = nil break end -- not indexed: the leader reads a snapshot
      parts[#parts + 1] = id .. '\30' .. info[i]
    end
    if parts then msg = table.concat(parts, '\31') end
  end
end
redis.call('PUBLISH', ARGV[7], msg)
publish_runs(ARGV[8], {o .. '#' .. ARGV[6] .. '#' .. ARGV[2]})
return 1
