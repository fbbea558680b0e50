-- snapshot: a group and its active and waiting runs, in one round trip (read-only).
-- KEYS[1] group hash, KEYS[2] waiting zset, KEYS[3] active zset
-- ARGV[1] run-hash key prefix (Keys.RunPrefix, same hash tag; see RATIONALE.md),
-- ARGV[2..] run fields to return
-- returns: {{policy, max_active, version}, now_ms, {active runs}, {waiting runs}},
-- each run = HMGET of the fields, runs ordered by seq
-- errors: WS_NOT_FOUND (no such group)
local g = redis.call('HMGET', KEYS[1], 'policy', 'max_active', 'version')
if not g[1] then
  return redis.error_reply('WS_NOT_FOUND group does not exist')
end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
local function load(zkey)
  local out = {}
  for _, id in ipairs(redis.call('ZRANGE', zkey, 0, -1)) do
    out[#out + 1] = redis.call('HMGET', ARGV[1] .. id, unpack(fields))
  end
  return out
end
return {g, now_ms(), load(KEYS[3]), load(KEYS[2])}
