-- heartbeat: extend a worker's expiry and, when asked, return its slots
-- (worker write).
-- KEYS[1] workers zset, KEYS[2] worker hash, KEYS[3] slots hash
-- ARGV[1] identity, ARGV[2] ttl_ms, ARGV[3] '1' = return the slots,
-- ARGV[4] '1' = always write (HINCRBY beats): a durable worker's WAIT after
-- it then covers every write before it, even when the expiry did not move
-- returns: {value of slot 0, ..., slot N-1} ("" free, else "run#token#task"),
-- or {} unless ARGV[3] is '1'
-- errors: WS_UNKNOWN_WORKER (never registered or reaped), WS_INVALID
-- replay: idempotent.
-- bound: O(1); with the slots O(s), s the slots of the worker (read in chunks of 1,000)
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 then
  return redis.error_reply('WS_INVALID worker ' .. ARGV[1] .. ': ttl must be >= 1ms')
end
local n = tonumber(redis.call('HGET', KEYS[2], 'slots') or '0')
if n == 0 then
  return redis.error_reply('WS_UNKNOWN_WORKER worker ' .. ARGV[1] .. ' is not registered (reaped?)')
end
redis.call('ZADD', KEYS[1], now_ms() + ttl, ARGV[1])
if ARGV[4] == '1' then redis.call('HINCRBY', KEYS[2], 'beats', 1) end
local out = {}
if ARGV[3] ~= '1' then return out end
for lo = 0, n - 1, 1000 do
  local fields = {}
  for i = lo, math.min(lo + 999, n - 1) do fields[#fields + 1] = ARGV[1] .. '#' .. i end
  for _, v in ipairs(redis.call('HMGET', KEYS[3], unpack(fields))) do
    out[#out + 1] = v or ''
  end
end
return out
