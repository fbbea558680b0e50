-- delete_group: delete a group, or discard a chunk of its waiting runs first
-- (client write, unfenced).
-- KEYS[1] groups set, KEYS[2] group hash, KEYS[3] waiting zset,
-- KEYS[4] active zset, KEYS[5] dirty set, KEYS[6] the group's waiting-run
-- index (Keys.WaitInfo), KEYS[7] the group's finished zset (retention
-- index), KEYS[8] retire zset, KEYS[9] the group's delayed zset, KEYS[10]
-- timers zset, KEYS[11] the group's launches list, KEYS[12..] run hashes
-- of the waiting runs to discard (the caller read them: the oldest chunk
-- of waiting, then of delayed)
-- ARGV[1] group name, ARGV[2] force ("1": discard waiting runs; "2": only
-- discard them, never delete: storage.DiscardWaiting, active runs allowed),
-- ARGV[3] reason, ARGV[4] run-events channel (publish_runs: DISCARDED per
-- run), ARGV[5..] the run ids of KEYS[12..]
-- returns: {deleted (1|0), waiting runs left, runs discarded by this call}. With force, discards the
-- given runs that are still waiting in this group and deletes the group
-- only when none is left: the caller repeats until deleted.
-- errors (nothing written): WS_NOT_FOUND (group), WS_BAD_STATE (active runs;
-- waiting runs without force)
-- writes: discarded runs (state DISCARDED, finished_at, reason; into the
-- finished zset and retire); when empty: DEL group hash, waiting and
-- active and delayed zsets, the index and the launches, SREM groups and dirty, ZREM
-- timers. Waiting runs include the delayed ones (not due yet). Finished runs keep
-- their records (retention removes them: the group stays in retire).
-- bound: O(given runs) per call (the caller passes at most 100: deleteChunk)
-- replay: a retried call discards the next chunk or finds the group gone.
if redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.error_reply('WS_NOT_FOUND group ' .. ARGV[1] .. ' does not exist')
end
local active = redis.call('ZCARD', KEYS[4])
local only = ARGV[2] == '2'
if active > 0 and not only then
  return redis.error_reply('WS_BAD_STATE group ' .. ARGV[1] .. ' has ' .. active ..
    ' active run(s) (LAUNCHED, RUNNING or STOPPING): drain it first (wasmsched group drain ' .. ARGV[1] .. ' --stop)')
end
local waiting = redis.call('ZCARD', KEYS[3]) + redis.call('ZCARD', KEYS[9])
local discarded = 0
if waiting > 0 then
  if ARGV[2] ~= '1' and not only then
    return redis.error_reply('WS_BAD_STATE group ' .. ARGV[1] .. ' has ' .. waiting ..
      ' waiting run(s): --force discards them')
  end
  local now = now_ms()
  local ev = {}
  for j = 12, #KEYS do
    local id = ARGV[j - 7]
    if redis.call('ZSCORE', KEYS[3], id) or redis.call('ZSCORE', KEYS[9], id) then
      redis.call('HSET', KEYS[j], 'state', 'DISCARDED', 'finished_at', now, 'reason', ARGV[3])
      redis.call('ZREM', KEYS[3], id)
      redis.call('ZREM', KEYS[9], id)
      redis.call('HDEL', KEYS[6], id)
      redis.call('ZADD', KEYS[7], now, id)
      redis.call('ZADD', KEYS[8], 'NX', now, ARGV[1])
      waiting = waiting - 1
      discarded = discarded + 1
      ev[#ev + 1] = 'DISCARDED#' .. ARGV[1] .. '#' .. id
    end
  end
  publish_runs(ARGV[4], ev)
  if discarded > 0 then
    redis.call('HINCRBY', KEYS[2], 'version', 1) -- a decision on the old queue is stale
  end
  if waiting > 0 or only then return {0, waiting, discarded} end
end
if only then return {0, 0, 0} end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[9], KEYS[11])
redis.call('ZREM', KEYS[10], ARGV[1])
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[5], ARGV[1])
return {1, 0, discarded}
