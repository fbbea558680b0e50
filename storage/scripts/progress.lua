-- progress: a RUNNING run's latest progress, from the worker executing it
-- (worker write, unfenced; the worker rate-limits it: storage.ProgressEvery).
-- KEYS[1] run hash
-- ARGV[1] run id, ARGV[2] worker identity, ARGV[3] assignment token,
-- ARGV[4] fraction ("0" to "1", or "" when unknown), ARGV[5] message (at
-- most limits.MaxProgressMessage bytes, checked by the caller), ARGV[6] run-events
-- channel
-- returns: 1 (written), or 0 when the run is no longer RUNNING under that
-- token on that worker (finished, stopped, moved: nothing written)
-- writes: progress ("fraction␟message␟at_ms"); run event RUNNING#group#id
-- (watchers re-read the run)
-- bound: O(tasks)
local r = redis.call('HMGET', KEYS[1], 'state', 'group', 'assign')
if r[1] ~= 'RUNNING' and r[1] ~= 'STOPPING' then return 0 end
local held = false
for _, a in ipairs(parse_assign(r[3] or '')) do
  if a.w == ARGV[2] and a.tok == ARGV[3] then held = true break end
end
if not held then return 0 end
redis.call('HSET', KEYS[1], 'progress', ARGV[4] .. '\31' .. ARGV[5] .. '\31' .. string.format('%d', now_ms()))
publish_runs(ARGV[6], {'RUNNING#' .. r[2] .. '#' .. ARGV[1]})
return 1
