-- apply.lua without the waiting-run index (keys: setup.lua folded): the run leaves waiting by a ZREM
-- of its longer member.
-- the apply's commands for 32 one-launch groups, no Lua logic beyond the calls
local r = tonumber(ARGV[1])
for g = 1, 32 do
  local kg = 'ns:group:g' .. g
  local id = 'r' .. g .. '-' .. r
  redis.call('HMGET', kg, 'version', 'last_claim', 'discard_below', 'hist')
  redis.call('ZREM', kg .. ':waiting', id .. '|' .. r .. ',0,1,1796345385519,1,1,0,')
  redis.call('ZADD', kg .. ':active', r, id)
  redis.call('HGET', 'ns:slots', 'bench-worker-0#1796345385519195323#9e63a5802087dfe1#' .. g)
  redis.call('HSET', 'ns:slots', 'bench-worker-0#1796345385519195323#9e63a5802087dfe1#' .. g, id .. '#1796345385519-77.' .. g .. '#0')
  redis.call('HSET', 'ns:run:' .. id, 'dec', 'c-g-10\31' .. '5\31' .. '1796345385519\31launch\31wait\31' .. '1\31' .. 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\31' .. '0\31', 'state', 'RUNNING', 'launched_at', '1796345385519', 'started_at', '1796345385519', 'assign', 'bench-worker-0#1796345385519195323#9e63a5802087dfe1#' .. g .. '#1796345385519-77.' .. g .. '#0', 'policy', 'wait', 'policy_version', '1')
  redis.call('LPUSH', kg .. ':decisions', '1796345385519\31c-g-10\31' .. '5\31wait\31' .. '1\31' .. '0\31' .. '1\31' .. '0\31' .. '0\31' .. '0')
  redis.call('HSET', kg, 'version', '11', 'last_claim', 'c-g-11', 'dv', '11')
end
return 1
