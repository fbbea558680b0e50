-- report: the task-0 worker reports a run's outcome (worker write, token-guarded).
-- KEYS[1] run hash, KEYS[2] slots hash, KEYS[3] free zset, KEYS[4] group hash,
-- KEYS[5] active zset, KEYS[6] retire zset, KEYS[7] restore set, KEYS[8] dirty set,
-- KEYS[9] the group's finished zset (retention index)
-- ARGV[1] worker identity, ARGV[2] run id, ARGV[3] token, ARGV[4] outcome
-- (SUCCEEDED|FAILED|STOPPED), ARGV[5] reason, ARGV[6] group, ARGV[7] work
-- channel (PUBLISH of the group: the coordinator wakes; advisory), ARGV[8]
-- run-events channel (publish_runs: the run's final state)
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
-- bound: O(k), k the slots of the run
local o = ARGV[4]
if o ~= 'SUCCEEDED' and o ~= 'FAILED' and o ~= 'STOPPED' then
  return redis.error_reply('WS_INVALID outcome ' .. o .. ' (want SUCCEEDED, FAILED or STOPPED)')
end
local r = redis.call('HMGET', KEYS[1], 'state', 'group', 'assign', 'report_token')
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
redis.call('HSET', KEYS[1], 'state', o, 'finished_at', fin, 'reason', reason, 'report_token', ARGV[3])
redis.call('ZADD', KEYS[9], fin, ARGV[2])
redis.call('ZADD', KEYS[6], 'NX', fin, ARGV[6])
release_slots(KEYS[2], KEYS[3], ARGV[2], as)
redis.call('ZREM', KEYS[5], ARGV[2])
redis.call('SREM', KEYS[7], ARGV[2])
redis.call('HINCRBY', KEYS[4], 'version', 1)
redis.call('SADD', KEYS[8], ARGV[6])
redis.call('PUBLISH', ARGV[7], ARGV[6])
publish_runs(ARGV[8], {o .. '#' .. ARGV[6] .. '#' .. ARGV[2]})
return 1
