-- shared helpers (prepended by Go to every script; defines locals only, runs nothing)
-- now_ms(): Redis TIME in unix ms.
-- parse_assign(s): "worker#index#token#task,..." -> list of {w, i, tok, task}
--   (worker identities may contain '#'; index, token and task never do).
-- pick_free(kfree, kworkers, kslots, k, now[, alive]): up to k free slots
--   ({w, i, f}) on live workers (heartbeat expiry > now), in free-zset order,
--   reading the free zset in windows of max(2k, 16) until k are found;
--   alive (optional) caches worker liveness across calls; writes nothing.
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
local function pick_free(kfree, kworkers, kslots, k, now, alive)
  local got = {}
  if k <= 0 then return got end
  alive = alive or {}
  -- free holds exactly the free slots (every script that frees a slot adds
  -- it, every script that assigns or deletes one removes it), so only slots
  -- of dead, not yet reaped workers are skipped: read a window of it, not all.
  local win = math.max(2 * k, 16)
  local off = 0
  while true do
    local fs = redis.call('ZRANGE', kfree, off, off + win - 1)
    for _, f in ipairs(fs) do
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
          if #got == k then return got end
        end
      end
    end
    if #fs < win then return got end
    off = off + win
  end
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
