-- due: move a group's due delayed runs into its queue, and fire its
-- policy's wake when due (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] timers zset, KEYS[4] group hash,
-- KEYS[5] the group's delayed zset, KEYS[6] waiting zset, KEYS[7] the
-- group's waiting-run index (Keys.WaitInfo), KEYS[8] dirty set, KEYS[9]
-- seq, KEYS[10] runs zset
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] group, ARGV[4] limit (runs per
-- call, >= 1), ARGV[5] run-hash key prefix (Keys.RunPrefix), ARGV[6] work
-- channel (PUBLISH of the group when runs moved: the coordinator wakes)
-- returns: {moved, next due ms (-1: none left), woken (1: the policy's
-- wake fired), retried (of moved, the runs on a second or later attempt:
-- an automatic retry after its backoff, or a run or group retry)}
-- writes: each due run (delayed score <= now, the oldest first, at most
-- ARGV[4]) that is still WAITING gets a new seq (a due run queues behind
-- the runs already waiting, as a new submit would: a discard_below that
-- covers older seqs never covers it) and goes into waiting, the index and
-- runs (rescored); a run no longer WAITING (stopped, deleted meanwhile) is
-- only dropped from delayed. With runs moved: group version+1, dirty. A
-- wake_at (apply.lua: the policy asked to be decided again) at or before
-- now is removed and the group made dirty (not bumped: nothing changed
-- but time). The group's timer becomes the earliest of its delayed runs
-- and its pending wake (now if more runs are due) or is removed.
-- errors: WS_FENCED (prelude), WS_INVALID (limit).
-- replay: idempotent (a moved run is no longer in delayed).
-- bound: O(limit · log n)
local limit = tonumber(ARGV[4])
if not limit or limit < 1 then
  return redis.error_reply('WS_INVALID due: bad limit ' .. tostring(ARGV[4]))
end
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', string.format('%d', now), 'LIMIT', 0, limit)
local moved, retried, keep, rs = 0, 0, {}, {}
for _, id in ipairs(ids) do
  local r = redis.call('HMGET', ARGV[5] .. id, 'state', 'priority', 'slots', 'submitted_at', 'group',
    'attempt', 'max_attempts', 'labels')
  if r[1] == 'WAITING' and r[5] == ARGV[3] then
    keep[#keep + 1] = id
    rs[#keep] = r
    if (tonumber(r[6]) or 1) > 1 then retried = retried + 1 end
  end
end
if #keep > 0 then
  -- the new seqs are contiguous: one INCRBY, then one ZADD / HSET per key
  local first = redis.call('INCRBY', KEYS[9], #keep) - #keep + 1
  local wz, wi = {}, {}
  for i, id in ipairs(keep) do
    local seq, r = first + i - 1, rs[i]
    redis.call('HSET', ARGV[5] .. id, 'seq', seq)
    wz[#wz + 1] = seq; wz[#wz + 1] = id
    -- not_before is what made it wait: a policy sees when it became due
    wi[#wi + 1] = id; wi[#wi + 1] = winfo(seq, r[2], r[3], r[4], r[6], r[7], string.format('%d', now), r[8])
  end
  redis.call('ZADD', KEYS[6], unpack(wz))
  redis.call('HSET', KEYS[7], unpack(wi))
  redis.call('ZADD', KEYS[10], unpack(wz))
  moved = #keep
end
if #ids > 0 then
  redis.call('ZREM', KEYS[5], unpack(ids))
end
local wake = tonumber(redis.call('HGET', KEYS[4], 'wake_at') or '')
local woken = 0
if wake and wake <= now then
  redis.call('HDEL', KEYS[4], 'wake_at')
  wake, woken = nil, 1
end
if moved > 0 then
  redis.call('HINCRBY', KEYS[4], 'version', 1)
end
if moved > 0 or woken == 1 then
  redis.call('SADD', KEYS[8], ARGV[3])
  redis.call('PUBLISH', ARGV[6], ARGV[3])
end
local first = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
local nxt = wake
if #first > 0 then
  nxt = math.max(tonumber(first[2]), now)
  if wake and wake < nxt then nxt = wake end
end
if not nxt then
  redis.call('ZREM', KEYS[3], ARGV[3])
  return {moved, -1, woken, retried}
end
redis.call('ZADD', KEYS[3], string.format('%d', nxt), ARGV[3])
return {moved, nxt, woken, retried}
