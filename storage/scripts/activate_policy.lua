-- activate_policy: activate a version, or roll back to the previously active one (operator write).
-- KEYS[1] policy hash, KEYS[2] versions list, KEYS[3] history list,
-- KEYS[4] activations list (stack of activated versions), KEYS[5] policygen counter,
-- KEYS[6] dirty set, KEYS[7] groups set (a change of the active version marks
-- every group dirty, so each is decided again with it)
-- ARGV[1] name, ARGV[2] version (activate; 0 = none: the embedded built-in
-- of a built-in name, no active version for any other) or "" (rollback),
-- ARGV[3] who, ARGV[4] note, ARGV[5] channel, ARGV[6] op id (random per call)
-- A rollback pops the stack's top entries equal to the active version (the
-- current one, and the duplicates a deleted version left next to it) and
-- activates the one below; with none below it goes to version 0 (as an
-- automatic rollback does).
-- returns: the active version afterwards
-- errors (nothing written): WS_NOT_FOUND (policy or version), WS_BAD_STATE
-- (rollback with no earlier active version: version 0 is active already)
-- writes: active, activations (push / trim), policygen INCR, history,
-- PUBLISH "name version gen".
-- replay: activating the active version writes nothing; a retried rollback
-- finds last_op == op and returns the active version.
-- bound: O(activations + groups): the stack is read once, SUNIONSTORE
-- marks every group dirty (registry reads are O(1) per version)
local US = string.char(31)
local p = redis.call('HMGET', KEYS[1], 'kind', 'active', 'last_op')
if not p[1] then
  return redis.error_reply('WS_NOT_FOUND policy ' .. ARGV[1] .. ' does not exist')
end
if p[3] == ARGV[6] then return tonumber(p[2]) end
local active = tonumber(p[2]) or 0
local target, action, keep
if ARGV[2] ~= '' then
  target, action = tonumber(ARGV[2]), 'activate'
  if not target or target < 0 or target > redis.call('LLEN', KEYS[2]) then
    return redis.error_reply('WS_NOT_FOUND policy ' .. ARGV[1] .. ' has no version ' .. ARGV[2])
  end
  if active == target then return target end
  if target > 0 and string.sub(redis.call('LINDEX', KEYS[2], target - 1), 1, 1) == US then
    return redis.error_reply('WS_NOT_FOUND version ' .. target .. ' of policy ' .. ARGV[1] .. ' was deleted')
  end
else
  action = 'rollback'
  local stack = redis.call('LRANGE', KEYS[4], 0, -1)
  keep = #stack
  while keep > 0 and (tonumber(stack[keep]) or 0) == active do keep = keep - 1 end
  target = keep > 0 and (tonumber(stack[keep]) or 0) or 0
  if target == active then
    return redis.error_reply('WS_BAD_STATE policy ' .. ARGV[1] .. ' has no earlier active version to roll back to')
  end
end
if action == 'activate' then
  redis.call('RPUSH', KEYS[4], target)
elseif keep == 0 then
  redis.call('DEL', KEYS[4])
else
  redis.call('LTRIM', KEYS[4], 0, keep - 1)
end
redis.call('HSET', KEYS[1], 'active', target, 'last_op', ARGV[6])
local gen = redis.call('INCR', KEYS[5])
redis.call('RPUSH', KEYS[3], string.format('%d', now_ms()) .. US .. ARGV[3] .. US .. action .. US .. target .. US .. ARGV[4])
redis.call('SUNIONSTORE', KEYS[6], KEYS[6], KEYS[7])
redis.call('PUBLISH', ARGV[5], ARGV[1] .. ' ' .. target .. ' ' .. gen)
return target
