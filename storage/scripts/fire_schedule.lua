-- fire_schedule: submit a schedule's tick and move it to its next one
-- (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] schedules zset, KEYS[4] schedule
-- hash, KEYS[5..15] the run's keys as submit.lua's KEYS[1..11] (seq,
-- groups, group hash, waiting, dirty, run hash, runs, group gen, index,
-- delayed, timers)
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] name, ARGV[4] the tick the caller
-- read (the zset's score), ARGV[5] the tick to submit (the latest at or
-- before now: the missed-tick rule), ARGV[6] ticks missed before it,
-- ARGV[7] the next tick (after now), ARGV[8] the run id (the tick's own:
-- storage.ScheduleRunID), ARGV[9] op id, ARGV[10] work channel, ARGV[11]
-- run-events channel, ARGV[12] the default backoff
-- returns: {1, outcome}: submitted, exists (the tick's run is there: it was
-- submitted before); {0, why}: stale (the schedule's tick is not ARGV[4]:
-- changed, or fired already), paused, gone
-- writes: a new run (as submit.lua, from the schedule's spec; the group's
-- run defaults apply), last_tick, last_run, submitted+1, missed+ARGV[6],
-- the zset score = ARGV[7]; all or nothing, so a tick is submitted once
-- whichever leader fires it.
-- bound: O(log n)
local h = redis.call('HMGET', KEYS[4], 'group', 'payload', 'priority', 'slots', 'timeout_ms', 'max_attempts', 'backoff', 'paused')
if not h[1] then
  redis.call('ZREM', KEYS[3], ARGV[3])
  return {0, 'gone'}
end
local sc = redis.call('ZSCORE', KEYS[3], ARGV[3])
if not sc then return {0, 'gone'} end
if string.format('%d', tonumber(sc)) ~= ARGV[4] then return {0, 'stale'} end
if h[8] == '1' then
  redis.call('ZREM', KEYS[3], ARGV[3])
  return {0, 'paused'}
end
local outcome = 'exists'
if redis.call('EXISTS', KEYS[10]) == 0 then
  local K = {}
  for i = 5, 15 do K[#K + 1] = KEYS[i] end
  new_run(K, {h[1], ARGV[8], h[4] or '1', h[3] or '0', h[2] or '', '0', ARGV[9], ARGV[10], ARGV[11], '0',
    h[5] or '', h[6] or '', h[7] or '', ARGV[12]})
  redis.call('HSET', KEYS[10], 'schedule', ARGV[3])
  outcome = 'submitted'
  redis.call('HINCRBY', KEYS[4], 'submitted', 1)
end
redis.call('HSET', KEYS[4], 'last_tick', ARGV[5], 'last_run', ARGV[8])
if tonumber(ARGV[6]) > 0 then redis.call('HINCRBY', KEYS[4], 'missed', ARGV[6]) end
redis.call('ZADD', KEYS[3], ARGV[7], ARGV[3])
return {1, outcome}
