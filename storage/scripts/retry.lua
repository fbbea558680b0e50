-- retry: put a group's FAILED or STOPPED runs back to WAITING as a new
-- attempt of the same run (client write, unfenced).
-- KEYS[1] timers zset, KEYS[2] the group's delayed zset, KEYS[3] the
-- group's finished zset, KEYS[4] group hash
-- ARGV[1] group, ARGV[2] run-hash key prefix (Keys.RunPrefix), ARGV[3] who
-- (for the reason), ARGV[4] work channel (PUBLISH storage.TimerEvent: the
-- leader's timer task moves them into the queue), ARGV[5] run-events
-- channel, ARGV[6..] run ids (at most storage.maxRetryBatch)
-- returns: per run id, in order, "" (retried) or why not ("not_found",
-- "state STATE": only FAILED and STOPPED runs are retried)
-- writes: each retried run gets state WAITING, attempt + 1, max_attempts at
-- least that (it may run once more), not_before now, reason "retried by
-- WHO", its finished attempt in its attempt log (runs without retries kept
-- none: the entry is made from its record), no assignment or finish time;
-- it leaves the finished zset (retention) and is parked in delayed, due
-- now, so the timer queues it behind the runs already waiting, as any
-- retry (due.lua); its result, output and exit code stay until the new
-- attempt replaces them (its progress goes). Run events "WAITING#group#id".
-- errors: WS_NOT_FOUND (the group does not exist; nothing written)
-- replay: a retried run is WAITING: a replay reports it "state WAITING"
-- and writes nothing.
-- bound: O(runs)
if redis.call('EXISTS', KEYS[4]) == 0 then
  return redis.error_reply('WS_NOT_FOUND group ' .. ARGV[1] .. ' does not exist')
end
local now = now_ms()
local nows = string.format('%d', now)
local out, ev = {}, {}
for i = 6, #ARGV do
  local id = ARGV[i]
  local krun = ARGV[2] .. id
  local r = redis.call('HMGET', krun, 'state', 'group', 'attempt', 'max_attempts', 'attempts', 'assign',
    'started_at', 'finished_at', 'reason')
  if not r[1] or r[2] ~= ARGV[1] then
    out[#out + 1] = 'not_found'
  elseif r[1] ~= 'FAILED' and r[1] ~= 'STOPPED' then
    out[#out + 1] = 'state ' .. r[1]
  else
    local att, maxa = tonumber(r[3]) or 1, tonumber(r[4]) or 1
    local hist = r[5] or ''
    if maxa <= 1 or hist == '' then
      -- (a run without retries logs no attempt: this one's from its record)
      local worker = string.match(r[6] or '', '^([^,]*)#%d+#[^#,]*#%d+') or ''
      hist = attempt_log(hist, att, worker, r[7], r[8] or nows, r[1], r[9])
    end
    redis.call('HSET', krun, 'state', 'WAITING', 'attempt', att + 1, 'max_attempts', math.max(maxa, att + 1),
      'not_before', nows, 'reason', 'retried by ' .. ARGV[3] .. ' (attempt ' .. (att + 1) .. ')', 'attempts', hist)
    redis.call('HDEL', krun, 'assign', 'launched_at', 'started_at', 'finished_at', 'require', 'progress')
    redis.call('ZREM', KEYS[3], id)
    park(KEYS[2], KEYS[1], ARGV[1], id, now)
    ev[#ev + 1] = 'WAITING#' .. ARGV[1] .. '#' .. id
    out[#out + 1] = ''
  end
end
if #ev > 0 then
  redis.call('HINCRBY', KEYS[4], 'version', 1)
  redis.call('PUBLISH', ARGV[4], '#timer')
  publish_runs(ARGV[5], ev)
end
return out
