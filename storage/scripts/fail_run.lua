-- fail_run: the leader fails an active run (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] run hash, KEYS[4] group hash,
-- KEYS[5] active zset, KEYS[6] launched zset, KEYS[7] restore set,
-- KEYS[8] slots hash, KEYS[9] free zset, KEYS[10] dirty set, KEYS[11] the
-- group's finished zset (retention index), KEYS[12] retire zset, KEYS[13]
-- the group's delayed zset, KEYS[14] timers zset, KEYS[15] the launched
-- runs' index (Keys.LaunchInfo)
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] run id, ARGV[4] reason, ARGV[5] group,
-- ARGV[6] run-events channel (publish_runs: FAILED), ARGV[7] work channel
-- (PUBLISH of the group: the coordinator wakes; advisory)
-- returns: 1 (0 = already FAILED, nothing written: replay-safe)
-- errors (nothing written): WS_FENCED, WS_NOT_FOUND, WS_BAD_STATE (WAITING or final)
-- writes: FAILED + finished_at + reason, releases the slots still holding
-- run#token#task, removes from active/launched/restore, group version+1, dirty.
-- A RUNNING run with attempts left is retried instead, as report.lua does
-- (WAITING, attempt+1, parked until its backoff is over; returns 2).
-- bound: O(k), k the slots of the run
local r = redis.call('HMGET', KEYS[3], 'state', 'group', 'assign', 'attempt', 'max_attempts', 'backoff',
  'started_at', 'attempts')
if not r[1] or r[2] ~= ARGV[5] then
  return redis.error_reply('WS_NOT_FOUND run ' .. ARGV[3] .. ' does not exist')
end
if r[1] == 'FAILED' then return 0 end
if r[1] ~= 'LAUNCHED' and r[1] ~= 'RUNNING' and r[1] ~= 'STOPPING' then
  return redis.error_reply('WS_BAD_STATE fail run ' .. ARGV[3] .. ': run is ' .. r[1] .. ', want LAUNCHED, RUNNING or STOPPING')
end
local fin = now_ms()
local att, maxa = tonumber(r[4]) or 1, tonumber(r[5]) or 1
local retry = r[1] == 'RUNNING' and retry_at(att, maxa, r[6], fin)
local hist = {}
if maxa > 1 then
  local w = ''
  for _, a in ipairs(parse_assign(r[3])) do if a.task == 0 then w = a.w end end
  hist = {'attempts', attempt_log(r[8], att, w, r[7], fin, 'FAILED', ARGV[4])}
end
local state = 'FAILED'
if retry then
  state = 'WAITING'
  redis.call('HSET', KEYS[3], 'state', state, 'attempt', att + 1, 'not_before', string.format('%d', retry),
    'reason', 'attempt ' .. att .. ' of ' .. maxa .. ' failed: ' .. ARGV[4], unpack(hist))
  redis.call('HDEL', KEYS[3], 'assign', 'launched_at', 'started_at', 'require')
  park(KEYS[13], KEYS[14], ARGV[5], ARGV[3], retry)
else
  redis.call('HSET', KEYS[3], 'state', 'FAILED', 'finished_at', fin, 'reason', ARGV[4], unpack(hist))
  redis.call('ZADD', KEYS[11], fin, ARGV[3])
  redis.call('ZADD', KEYS[12], 'NX', fin, ARGV[5])
end
release_slots(KEYS[8], KEYS[9], ARGV[3], parse_assign(r[3]))
redis.call('ZREM', KEYS[5], ARGV[3])
redis.call('ZREM', KEYS[6], ARGV[3])
redis.call('HDEL', KEYS[15], ARGV[3])
redis.call('SREM', KEYS[7], ARGV[3])
redis.call('HINCRBY', KEYS[4], 'version', 1)
redis.call('SADD', KEYS[10], ARGV[5])
if ARGV[7] and ARGV[7] ~= '' then
  redis.call('PUBLISH', ARGV[7], ARGV[5])
  if retry then redis.call('PUBLISH', ARGV[7], '#timer') end
end
publish_runs(ARGV[6], {state .. '#' .. ARGV[5] .. '#' .. ARGV[3]})
if retry then return 2 end
return 1
