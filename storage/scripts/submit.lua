-- submit: add a WAITING run to a group (client write, unfenced).
-- KEYS[1] seq, KEYS[2] groups set, KEYS[3] group hash, KEYS[4] waiting zset,
-- KEYS[5] dirty set, KEYS[6] run hash, KEYS[7] runs zset, KEYS[8] the
-- group incarnation counter (Keys.GroupGen), KEYS[9] the group's
-- waiting-run index (Keys.WaitInfo), KEYS[10] (optional) the idempotency
-- key's key (Keys.Idempotency)
-- ARGV[1] group, ARGV[2] run id, ARGV[3] slots (>= 1), ARGV[4] priority,
-- ARGV[5] payload, ARGV[6] duration_ms, ARGV[7] op id (random per call),
-- ARGV[8] work channel (PUBLISH of the group: the coordinator wakes; advisory),
-- ARGV[9] run-events channel (publish_runs: WAITING#group#id),
-- ARGV[10] the idempotency key's lifetime in ms, ARGV[11] run-hash key
-- prefix (Keys.RunPrefix), ARGV[12] the request's fingerprint (its group
-- and run settings), ARGV[13] '1' when the caller chose ARGV[2] (all four
-- with KEYS[10] only)
-- returns: {seq, submitted_at_ms, replayed (0|1), run id}
-- idempotency: with KEYS[10], a key that names a run that still exists
-- returns that run (replayed = 1, its id) when the request's fingerprint is
-- the one it was made with (and a run id the caller chose is that run's);
-- else the run is submitted and KEYS[10] names it
-- ("id<US>fingerprint") for ARGV[10] ms.
-- errors: WS_DUP (run id exists, submitted by another call), WS_CONFLICT
-- (the idempotency key names a run made by another request: nothing
-- written), WS_INVALID
-- replay: a retried call (same op id) finds its own run and returns it, replayed = 1.
-- bound: O(log n) (one run, its group's waiting zset)
local slots = tonumber(ARGV[3])
if not slots or slots < 1 then
  return redis.error_reply('WS_INVALID run ' .. ARGV[2] .. ': slots must be >= 1')
end
if KEYS[10] then
  local v = redis.call('GET', KEYS[10])
  if v then
    local prev, fp = string.match(v, '^([^\31]*)\31?(.*)$')
    local r = redis.call('HMGET', ARGV[11] .. prev, 'seq', 'submitted_at', 'group')
    if r[1] then
      if fp ~= ARGV[12] or (ARGV[13] == '1' and prev ~= ARGV[2]) then
        return redis.error_reply('WS_CONFLICT the idempotency key was used for run ' .. prev .. ' (group ' ..
          tostring(r[3]) .. ') with another request; reuse it only for the same request')
      end
      return {tonumber(r[1]), tonumber(r[2]), 1, prev}
    end
  end
end
local r = redis.call('HMGET', KEYS[6], 'op', 'seq', 'submitted_at', 'id')
if r[4] then
  if r[1] == ARGV[7] then
    return {tonumber(r[2]), tonumber(r[3]), 1, ARGV[2]}
  end
  return redis.error_reply('WS_DUP run ' .. ARGV[2] .. ' already exists')
end
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[3], 'name', ARGV[1], 'policy', 'wait', 'max_active', 1, 'version', 0,
    'gen', redis.call('INCR', KEYS[8]))
end
local now = now_ms()
local seq = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[6], 'id', ARGV[2], 'group', ARGV[1], 'seq', seq, 'state', 'WAITING',
  'slots', slots, 'priority', ARGV[4], 'payload', ARGV[5], 'duration_ms', ARGV[6],
  'submitted_at', now, 'op', ARGV[7])
redis.call('ZADD', KEYS[4], seq, ARGV[2])
redis.call('HSET', KEYS[9], ARGV[2], seq .. ',' .. ARGV[4] .. ',' .. slots .. ',' .. now)
redis.call('ZADD', KEYS[7], seq, ARGV[2])
redis.call('HINCRBY', KEYS[3], 'version', 1)
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('PUBLISH', ARGV[8], ARGV[1])
publish_runs(ARGV[9], {'WAITING#' .. ARGV[1] .. '#' .. ARGV[2]})
if KEYS[10] then
  redis.call('SET', KEYS[10], ARGV[2] .. '\31' .. ARGV[12], 'PX', ARGV[10])
end
return {seq, now, 0, ARGV[2]}
