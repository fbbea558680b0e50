-- restore_check: for each recorded slot of a run, is its worker alive and
-- does the slot still hold run#token#task? (read-only)
-- KEYS[1] run hash, KEYS[2] workers zset, KEYS[3] slots hash
-- ARGV[1] run id, ARGV[2] ms since the caller's term began (-1: none; a
-- worker whose heartbeat expired is alive while spared: _lib.lua), ARGV[3]
-- the worker hashes' key prefix (Keys.Worker of ""), ARGV[4..] run fields
-- to return
-- returns: {{run fields}, {worker, index, token, task, alive(0|1), held(0|1), ...}}
-- errors: WS_NOT_FOUND
-- bound: O(k), k the slots of the run
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
local r = redis.call('HMGET', KEYS[1], unpack(fields))
local assign = redis.call('HGET', KEYS[1], 'assign')
if not redis.call('HGET', KEYS[1], 'state') then
  return redis.error_reply('WS_NOT_FOUND run ' .. ARGV[1] .. ' does not exist')
end
local now, since = now_ms(), tonumber(ARGV[2]) or -1
local out = {}
for _, a in ipairs(parse_assign(assign)) do
  local sc = redis.call('ZSCORE', KEYS[2], a.w)
  local alive = (sc and (tonumber(sc) > now or spared(ARGV[3] .. a.w, since))) and 1 or 0
  local held = (redis.call('HGET', KEYS[3], a.w .. '#' .. a.i) == ARGV[1] .. '#' .. a.tok .. '#' .. a.task) and 1 or 0
  out[#out + 1] = a.w; out[#out + 1] = a.i; out[#out + 1] = a.tok; out[#out + 1] = tostring(a.task)
  out[#out + 1] = alive; out[#out + 1] = held
end
return {r, out}
