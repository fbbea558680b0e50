-- shared helpers (prepended by Go to every script; defines locals only, runs nothing)
-- now_ms(): Redis TIME in unix ms.
-- parse_assign(s): "worker#index#token#task,..." -> list of {w, i, tok, task}
--   (worker identities may contain '#'; index, token and task never do).
-- pick_free(kfree, kworkers, kslots, k, now): up to k free slots ({w, i, f})
--   on live workers (heartbeat expiry > now), in free-zset order; writes nothing.
-- new_token(ktokens, now): a fresh assignment token "now-counter", unique forever.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function parse_assign(s)
  local out = {}
  if not s or s == '' then return out end
  for e in string.gmatch(s, '[^,]+') do
    local w, i, tok, task = string.match(e, '^(.*)#(%d+)#([^#]+)#(%d+)$')
    if w then out[#out + 1] = {w = w, i = i, tok = tok, task = tonumber(task)} end
  end
  return out
end
local function join_assign(list)
  local parts = {}
  for _, a in ipairs(list) do
    parts[#parts + 1] = a.w .. '#' .. a.i .. '#' .. a.tok .. '#' .. a.task
  end
  return table.concat(parts, ',')
end
local function pick_free(kfree, kworkers, kslots, k, now)
  local got = {}
  if k <= 0 then return got end
  local alive = {}
  for _, f in ipairs(redis.call('ZRANGE', kfree, 0, -1)) do
    local w, i = string.match(f, '^(.*)#(%d+)$')
    if w then
      local a = alive[w]
      if a == nil then
        local sc = redis.call('ZSCORE', kworkers, w)
        a = (sc and tonumber(sc) > now) or false
        alive[w] = a
      end
      if a and redis.call('HGET', kslots, f) == '' then
        got[#got + 1] = {w = w, i = i, f = f}
        if #got == k then break end
      end
    end
  end
  return got
end
local function new_token(ktokens, now)
  return string.format('%d', now) .. '-' .. redis.call('INCR', ktokens)
end
local function flat_assign(list)
  local out = {}
  for _, a in ipairs(list) do
    out[#out + 1] = a.w; out[#out + 1] = a.i; out[#out + 1] = a.tok; out[#out + 1] = tostring(a.task)
  end
  return out
end
