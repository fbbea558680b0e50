-- deregister_worker: a worker leaves (worker write, the end of a graceful
-- shutdown).
-- KEYS[1] draining set, KEYS[2] worker hash, KEYS[3] slots hash, KEYS[4]
-- free zset, KEYS[5] workers zset, KEYS[6] placement hash
-- ARGV[1] identity
-- returns: 1 (0: not registered, nothing to do)
-- errors: WS_BAD_STATE (a slot is still assigned: nothing written)
-- writes: deletes its slots, its free entries, its hash, its workers entry,
-- its draining mark, its placement profile.
-- replay: idempotent (a second call finds it gone).
-- bound: O(s), s the worker's slots
local n = tonumber(redis.call('HGET', KEYS[2], 'slots') or '')
if not n then
  redis.call('SREM', KEYS[1], ARGV[1])
  drop_profile(KEYS[6], ARGV[1])
  return 0
end
for i = 0, n - 1 do
  local v = redis.call('HGET', KEYS[3], ARGV[1] .. '#' .. i)
  if v and v ~= '' then
    return redis.error_reply('WS_BAD_STATE worker ' .. ARGV[1] .. ': slot ' .. i .. ' still holds ' .. v)
  end
end
for i = 0, n - 1 do
  local f = ARGV[1] .. '#' .. i
  redis.call('HDEL', KEYS[3], f)
  redis.call('ZREM', KEYS[4], f)
end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('SREM', KEYS[1], ARGV[1])
drop_profile(KEYS[6], ARGV[1])
return 1
