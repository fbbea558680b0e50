-- set_group: create or update a group (client write, unfenced).
-- KEYS[1] groups set, KEYS[2] group hash, KEYS[3] dirty set, KEYS[4] waiting zset, KEYS[5] active zset,
-- KEYS[6] the group incarnation counter (Keys.GroupGen: a new group's gen),
-- KEYS[7] retire zset
-- ARGV[1] group name, ARGV[2] policy ("" = keep; "wait" for a new group),
-- ARGV[3] max_active (>= 1; 0 = keep; 1 for a new group),
-- ARGV[4] window (>= 1; 0 = keep; unset for a new group = DefaultWindow),
-- ARGV[5] retention ms ("" = keep; "-1" = the namespace default; "0" = forever),
-- ARGV[6] work channel (optional: PUBLISH of the group, the coordinator
-- wakes; advisory), ARGV[7] the runs' default timeout ms ('' = keep, '0' =
-- none), ARGV[8] their default max attempts ('' = keep, '0' = none), ARGV[9]
-- their default backoff "base_ms,cap_ms" ('' = keep, '-' = none); the
-- defaults apply to runs submitted afterwards (submit.lua), KEYS[8] the
-- group's delayed zset, ARGV[10] the policy parameters' change ('' =
-- keep, 'merge': the pairs given are set, one with an empty value
-- removed, 'replace': the pairs given are all of them), ARGV[11] their
-- bound (abi.MaxParams), ARGV[12] its requirements of workers ('' = keep,
-- '-' = none, else "k=v" pairs 0x1d-separated, sorted, valid: the
-- placement of its runs launched from now on, apply.lua), ARGV[13] same
-- worker ('' = keep, '1' = each run's slots on one worker: the field same,
-- '0' = not), ARGV[14] its preferences ('' = keep, '-' = none, else
-- "~k=weight:v" pairs 0x1d-separated, sorted, valid: the field prefer,
-- merged into each launch's requirements as require is), ARGV[15..] name,
-- value pairs (valid, checked by the caller);
-- stored sorted by name, "name=value" 0x1d-separated
-- returns: {policy, max_active, version, waiting count, active count, window
-- (0 = default), retention ms (-1 = the namespace default), run timeout ms,
-- max attempts, backoff, delayed count, params, require, same ('1' or ''),
-- prefer}
-- errors (nothing written): WS_INVALID (max_active or window < 0, more
-- than ARGV[11] parameters after the change)
-- writes: group policy/max_active/window (only what was given changes),
-- version+1, dirty; a retention given puts the group in retire at 0 (the
-- retention task looks at its finished runs again). replay: bumps the
-- version again (harmless).
-- bound: O(1)
local cur = redis.call('HMGET', KEYS[2], 'policy', 'max_active', 'window', 'retention_ms', 'name',
  'run_timeout_ms', 'max_attempts', 'backoff', 'params', 'require', 'same', 'prefer')
local params = cur[9] or ''
if ARGV[10] == 'merge' or ARGV[10] == 'replace' then
  local m, names = {}, {}
  if ARGV[10] == 'merge' then
    for p in string.gmatch(params, '[^\29]+') do
      local k, v = string.match(p, '^([^=]+)=(.*)$')
      if k then m[k] = v end
    end
  end
  for i = 15, #ARGV - 1, 2 do
    if ARGV[10] == 'merge' and ARGV[i + 1] == '' then m[ARGV[i]] = nil else m[ARGV[i]] = ARGV[i + 1] end
  end
  for k in pairs(m) do names[#names + 1] = k end
  if #names > (tonumber(ARGV[11]) or 32) then
    return redis.error_reply('WS_INVALID group ' .. ARGV[1] .. ': ' .. #names .. ' policy parameters, at most ' .. ARGV[11])
  end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. '=' .. m[k] end
  params = table.concat(parts, '\29')
end
local policy = ARGV[2]
if policy == '' then policy = cur[1] or 'wait' end
local m = tonumber(ARGV[3])
if m == 0 then m = (cur[2] and tonumber(cur[2])) or 1 end
if not m or m < 1 then
  return redis.error_reply('WS_INVALID group ' .. ARGV[1] .. ': bad max_active ' .. ARGV[3])
end
local w = tonumber(ARGV[4] or '0')
if not w or w < 0 then
  return redis.error_reply('WS_INVALID group ' .. ARGV[1] .. ': bad window ' .. tostring(ARGV[4]))
end
local ret = tonumber(cur[4] or '-1')
local setret = ARGV[5] and ARGV[5] ~= ''
if setret then
  ret = tonumber(ARGV[5])
  if not ret or ret < -1 then
    return redis.error_reply('WS_INVALID group ' .. ARGV[1] .. ': bad retention ' .. ARGV[5])
  end
end
redis.call('SADD', KEYS[1], ARGV[1])
if not cur[5] then
  redis.call('HSET', KEYS[2], 'gen', redis.call('INCR', KEYS[6]))
end
redis.call('HSET', KEYS[2], 'name', ARGV[1], 'policy', policy, 'max_active', m)
if w > 0 then
  redis.call('HSET', KEYS[2], 'window', w)
else
  w = tonumber(cur[3]) or 0
end
if setret and ret == -1 then
  redis.call('HDEL', KEYS[2], 'retention_ms')
elseif setret then
  redis.call('HSET', KEYS[2], 'retention_ms', ret)
end
if setret then
  redis.call('ZADD', KEYS[7], 0, ARGV[1])
end
local function setdef(field, v, none, at)
  if not v or v == '' then return cur[at] end
  if v == none then redis.call('HDEL', KEYS[2], field) return nil end
  redis.call('HSET', KEYS[2], field, v)
  return v
end
local rt = setdef('run_timeout_ms', ARGV[7], '0', 6)
local ma = setdef('max_attempts', ARGV[8], '0', 7)
local bo = setdef('backoff', ARGV[9], '-', 8)
if params ~= (cur[9] or '') then
  if params == '' then redis.call('HDEL', KEYS[2], 'params') else redis.call('HSET', KEYS[2], 'params', params) end
end
local req = setdef('require', ARGV[12], '-', 10)
local same = cur[11] or ''
if ARGV[13] == '1' and same ~= '1' then
  same = '1'
  redis.call('HSET', KEYS[2], 'same', '1')
elseif ARGV[13] == '0' and same ~= '' then
  same = ''
  redis.call('HDEL', KEYS[2], 'same')
end
local pref = setdef('prefer', ARGV[14], '-', 12)
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('SADD', KEYS[3], ARGV[1])
if ARGV[6] and ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[6], ARGV[1]) end
return {policy, m, v, redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]), w, ret,
  tonumber(rt) or 0, tonumber(ma) or 0, bo or '', KEYS[8] and redis.call('ZCARD', KEYS[8]) or 0, params, req or '', same, pref or ''}
