-- push_policy: store a policy blob and append a version (operator write, unfenced).
-- KEYS[1] policies set, KEYS[2] policy hash, KEYS[3] versions list, KEYS[4] history list,
-- KEYS[5] activations list, KEYS[6] blob string, KEYS[7] policygen counter,
-- KEYS[8] dirty set, KEYS[9] groups set (an activation marks every group dirty,
-- so each is decided again with the new version)
-- ARGV[1] name, ARGV[2] kind, ARGV[3] sha256 hex, ARGV[4] blob, ARGV[5] who,
-- ARGV[6] note, ARGV[7] activate ("1"|"0"), ARGV[8] pub/sub channel
-- Entries are joined with "\31" (unit separator): versions "sha,at,who,note",
-- history "at,who,action,version,note".
-- returns: {version, pushed_at_ms}
-- errors (nothing written): WS_INVALID (kind differs from the name's kind),
-- WS_DUP "version N" (same sha already pushed under this name)
-- writes: blob SET NX, versions RPUSH, kind, history; with activate: active,
-- activations RPUSH, policygen INCR, PUBLISH "name version gen".
-- replay: a retried push returns WS_DUP with the version it created.
-- bound: O(versions of the policy) plus O(groups) when it activates (SUNIONSTORE)
local US = string.char(31)
local kind = redis.call('HGET', KEYS[2], 'kind')
if kind and kind ~= ARGV[2] then
  return redis.error_reply('WS_INVALID policy ' .. ARGV[1] .. ' is of kind ' .. kind .. ', not ' .. ARGV[2])
end
local vs = redis.call('LRANGE', KEYS[3], 0, -1)
for i, v in ipairs(vs) do
  if string.sub(v, 1, #ARGV[3] + 1) == ARGV[3] .. US then
    return redis.error_reply('WS_DUP version ' .. i .. ' of policy ' .. ARGV[1] .. ' has sha256 ' .. ARGV[3])
  end
end
local now = string.format('%d', now_ms())
redis.call('SET', KEYS[6], ARGV[4], 'NX')
local ver = redis.call('RPUSH', KEYS[3], ARGV[3] .. US .. now .. US .. ARGV[5] .. US .. ARGV[6])
redis.call('HSET', KEYS[2], 'name', ARGV[1], 'kind', ARGV[2])
if not redis.call('HGET', KEYS[2], 'active') then redis.call('HSET', KEYS[2], 'active', 0) end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[4], now .. US .. ARGV[5] .. US .. 'push' .. US .. ver .. US .. ARGV[6])
if ARGV[7] == '1' then
  redis.call('HSET', KEYS[2], 'active', ver)
  redis.call('RPUSH', KEYS[5], ver)
  local gen = redis.call('INCR', KEYS[7])
  redis.call('RPUSH', KEYS[4], now .. US .. ARGV[5] .. US .. 'activate' .. US .. ver .. US .. ARGV[6])
  redis.call('SUNIONSTORE', KEYS[8], KEYS[8], KEYS[9])
  redis.call('PUBLISH', ARGV[8], ARGV[1] .. ' ' .. ver .. ' ' .. gen)
end
return {ver, tonumber(now)}
