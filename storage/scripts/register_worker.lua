-- register_worker: register a worker with N slots, or refresh / resize it (worker write).
-- KEYS[1] workers zset, KEYS[2] worker hash, KEYS[3] slots hash, KEYS[4] free zset,
-- KEYS[5] placement hash (Keys.Placement)
-- ARGV[1] identity, ARGV[2] slots N (>= 1), ARGV[3] ttl_ms, ARGV[4] work
-- channel (optional: a PUBLISH when slots were added, so a slot manager
-- waiting for slots wakes; advisory), ARGV[5] its placement profile
-- ("labels 0x1e groups", valid; "" = none: _lib.lua Placement): set in
-- the placement hash (its field '#groups' counts the profiles with
-- groups), and its free slots get score 1 (0 without one)
-- returns: N
-- errors: WS_INVALID, WS_BAD_STATE (shrinking would drop an assigned slot; nothing written)
-- replay: idempotent (same N: only the expiry moves).
-- bound: O(s), s the old and new slot counts of the worker
local n, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or not ttl or ttl < 1 then
  return redis.error_reply('WS_INVALID worker ' .. ARGV[1] .. ': slots and ttl must be >= 1')
end
local old = tonumber(redis.call('HGET', KEYS[2], 'slots') or '0')
for i = n, old - 1 do
  local v = redis.call('HGET', KEYS[3], ARGV[1] .. '#' .. i)
  if v and v ~= '' then
    return redis.error_reply('WS_BAD_STATE worker ' .. ARGV[1] .. ': slot ' .. i .. ' is assigned, cannot shrink to ' .. n)
  end
end
local prof = ARGV[5] or ''
local was = redis.call('HGET', KEYS[5], ARGV[1]) or ''
local score = prof ~= '' and 1 or 0
if prof ~= was then
  -- '#groups' counts the workers that serve only some groups
  local had, has = string.match(was, '\30.') ~= nil, string.match(prof, '\30.') ~= nil
  if had ~= has then
    if redis.call('HINCRBY', KEYS[5], '#groups', has and 1 or -1) <= 0 then redis.call('HDEL', KEYS[5], '#groups') end
  end
  if prof ~= '' then redis.call('HSET', KEYS[5], ARGV[1], prof) else redis.call('HDEL', KEYS[5], ARGV[1]) end
  -- its free slots kept move to the new score
  for i = 0, math.min(old, n) - 1 do
    local f = ARGV[1] .. '#' .. i
    if redis.call('HGET', KEYS[3], f) == '' then redis.call('ZADD', KEYS[4], 'XX', score, f) end
  end
end
local now = now_ms()
if old == 0 then
  redis.call('HSET', KEYS[2], 'registered_at', now)
end
redis.call('HSET', KEYS[2], 'slots', n, 'ttl', ttl)
for i = old, n - 1 do
  redis.call('HSET', KEYS[3], ARGV[1] .. '#' .. i, '')
  redis.call('ZADD', KEYS[4], score, ARGV[1] .. '#' .. i)
end
for i = n, old - 1 do
  redis.call('HDEL', KEYS[3], ARGV[1] .. '#' .. i)
  redis.call('ZREM', KEYS[4], ARGV[1] .. '#' .. i)
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if n > old and ARGV[4] and ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], '')
end
return n
