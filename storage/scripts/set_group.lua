-- set_group: create or update a group (client write, unfenced).
-- KEYS[1] groups set, KEYS[2] group hash, KEYS[3] dirty set, KEYS[4] waiting zset, KEYS[5] active zset
-- ARGV[1] group name, ARGV[2] policy, ARGV[3] max_active (>= 1)
-- returns: {policy, max_active, version, waiting count, active count}
-- errors: WS_INVALID (max_active < 1)
-- writes: group policy/max_active, version+1, dirty. replay: bumps the version again (harmless).
local m = tonumber(ARGV[3])
if not m or m < 1 or ARGV[2] == '' then
  return redis.error_reply('WS_INVALID group ' .. ARGV[1] .. ': bad policy or max_active')
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'name', ARGV[1], 'policy', ARGV[2], 'max_active', m)
local v = redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('SADD', KEYS[3], ARGV[1])
return {ARGV[2], m, v, redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5])}
