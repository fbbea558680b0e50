-- submit: add a WAITING run to a group (client write, unfenced).
-- KEYS[1] seq, KEYS[2] groups set, KEYS[3] group hash, KEYS[4] waiting zset,
-- KEYS[5] dirty set, KEYS[6] run hash, KEYS[7] runs zset, KEYS[8] the
-- group incarnation counter (Keys.GroupGen), KEYS[9] the group's
-- waiting-run index (Keys.WaitInfo), KEYS[10] the group's delayed zset,
-- KEYS[11] timers zset, KEYS[12] (optional) the idempotency key's key
-- (Keys.Idempotency)
-- ARGV[1] group, ARGV[2] run id, ARGV[3] slots (>= 1), ARGV[4] priority,
-- ARGV[5] payload, ARGV[6] duration_ms, ARGV[7] op id (random per call),
-- ARGV[8] work channel (PUBLISH of the group: the coordinator wakes; advisory),
-- ARGV[9] run-events channel (publish_runs: WAITING#group#id),
-- ARGV[10] not_before ms (0 = none; at or before now = none),
-- ARGV[11] timeout_ms ('' = the group's run_timeout_ms, if any),
-- ARGV[12] max_attempts ('' = the group's, else 1), ARGV[13] backoff
-- "base_ms,cap_ms" ('' = the group's, else ARGV[14]), ARGV[14] the default
-- backoff, ARGV[15] labels (storage.encodeLabels; '' = none), ARGV[16]
-- the idempotency key's lifetime in ms, ARGV[17] run-hash key prefix
-- (Keys.RunPrefix), ARGV[18] the request's fingerprint (its group and run
-- settings), ARGV[19] '1' when the caller chose ARGV[2] (the last four
-- with KEYS[12] only)
-- returns: {seq, submitted_at_ms, replayed (0|1), run id, due (1 = in the
-- waiting zset, 0 = delayed until not_before), timeout_ms, max_attempts}
-- (a replay returns the first three and the id)
-- idempotency: with KEYS[12], a key that names a run that still exists
-- returns that run (replayed = 1, its id) when the request's fingerprint is
-- the one it was made with (and a run id the caller chose is that run's);
-- else the run is submitted and KEYS[12] names it
-- ("id<US>fingerprint") for ARGV[16] ms.
-- A run with a not_before ahead waits in the group's delayed zset (its
-- timer lowered to it; one PUBLISH of storage.TimerEvent): no snapshot
-- sees it, the group is neither bumped nor dirty; due.lua moves it into
-- waiting when due. The run hash gets timeout_ms, max_attempts, backoff
-- (with max_attempts > 1) and not_before only when set.
-- errors: WS_DUP (run id exists, submitted by another call), WS_CONFLICT
-- (the idempotency key names a run made by another request: nothing
-- written), WS_INVALID
-- replay: a retried call (same op id) finds its own run and returns it, replayed = 1.
-- bound: O(log n) (one run, its group's waiting zset)
local slots = tonumber(ARGV[3])
if not slots or slots < 1 then
  return redis.error_reply('WS_INVALID run ' .. ARGV[2] .. ': slots must be >= 1')
end
if KEYS[12] then
  local v = redis.call('GET', KEYS[12])
  if v then
    local prev, fp = string.match(v, '^([^\31]*)\31?(.*)$')
    local r = redis.call('HMGET', ARGV[17] .. prev, 'seq', 'submitted_at', 'group')
    if r[1] then
      if fp ~= ARGV[18] or (ARGV[19] == '1' and prev ~= ARGV[2]) then
        return redis.error_reply('WS_CONFLICT the idempotency key was used for run ' .. prev .. ' (group ' ..
          tostring(r[3]) .. ') with another request; reuse it only for the same request')
      end
      return {tonumber(r[1]), tonumber(r[2]), 1, prev, 1}
    end
  end
end
local r = redis.call('HMGET', KEYS[6], 'op', 'seq', 'submitted_at', 'id')
if r[4] then
  if r[1] == ARGV[7] then
    return {tonumber(r[2]), tonumber(r[3]), 1, ARGV[2], 1}
  end
  return redis.error_reply('WS_DUP run ' .. ARGV[2] .. ' already exists')
end
local seq, now, due, timeout, maxa = new_run(KEYS, ARGV)
if KEYS[12] then
  redis.call('SET', KEYS[12], ARGV[2] .. '\31' .. ARGV[18], 'PX', ARGV[16])
end
return {seq, now, 0, ARGV[2], due, timeout, maxa}
