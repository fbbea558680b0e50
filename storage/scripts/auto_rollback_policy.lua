-- auto_rollback_policy: roll a policy back only if the failing version is still active
-- (called by hosts after K consecutive failures of a version; unfenced, conditional).
-- KEYS[1] policy hash, KEYS[2] history list, KEYS[3] activations list (stack),
-- KEYS[4] policygen counter, KEYS[5] dirty set, KEYS[6] groups set (a rollback
-- marks every group dirty, so each is decided again with the restored version)
-- ARGV[1] name, ARGV[2] failing version (the caller saw it active), ARGV[3] who,
-- ARGV[4] reason, ARGV[5] channel
-- With no earlier active version the policy falls back to version 0: the
-- embedded built-in of a built-in name, for any other name no active
-- version at all (its groups hold, their runs wait, until an operator
-- activates or pushes a version).
-- returns: {rolled_back (1|0), active version afterwards}
-- errors (nothing written): WS_NOT_FOUND (policy)
-- bound: O(1) (a few keys of one policy; the dirty-set union is O(groups),
-- as for an activation)
-- writes (only when ARGV[2] is still active): active, activations RPOP,
-- policygen INCR, history "auto-rollback" with the reason, auto_rollback_*
-- fields (from, to, at, reason), PUBLISH "name version gen".
-- replay: a retried call finds the version no longer active and returns {0, active}.
local US = string.char(31)
local p = redis.call('HMGET', KEYS[1], 'kind', 'active')
if not p[1] then
  return redis.error_reply('WS_NOT_FOUND policy ' .. ARGV[1] .. ' does not exist')
end
local active = tonumber(p[2]) or 0
if active ~= tonumber(ARGV[2]) then return {0, active} end
local target = 0
if redis.call('LLEN', KEYS[3]) >= 2 then
  target = tonumber(redis.call('LINDEX', KEYS[3], -2))
end
redis.call('RPOP', KEYS[3])
local now = string.format('%d', now_ms())
redis.call('HSET', KEYS[1], 'active', target, 'auto_rollback_from', active, 'auto_rollback_to', target,
  'auto_rollback_at', now, 'auto_rollback_reason', ARGV[4])
local gen = redis.call('INCR', KEYS[4])
redis.call('RPUSH', KEYS[2], now .. US .. ARGV[3] .. US .. 'auto-rollback' .. US .. target .. US .. ARGV[4])
redis.call('SUNIONSTORE', KEYS[5], KEYS[5], KEYS[6])
redis.call('PUBLISH', ARGV[5], ARGV[1] .. ' ' .. target .. ' ' .. gen)
return {1, target}
