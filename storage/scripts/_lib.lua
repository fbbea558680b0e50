-- shared helpers (prepended by Go to every script; defines locals only, runs nothing)
-- now_ms(): Redis TIME in unix ms.
-- parse_assign(s): "worker#index#token#task,..." -> list of {w, i, tok, task}
--   (worker identities may contain '#'; index, token and task never do).
-- pick_free(kfree, kworkers, kslots, k, now[, alive]): up to k free slots
--   ({w, i, f}) on live workers (heartbeat expiry > now), in free-zset order,
--   reading the free zset in windows of max(2k, 16) until k are found;
--   alive (optional) caches worker liveness across calls; writes nothing.
-- free_cursor(kfree, kworkers, kslots, now[, win]): an iterator over the
--   usable free slots for a batch of allocations: c.take(k) returns k slots
--   ({w, i, f}) or nil when fewer remain (then the caller stops); each free
--   zset entry is read and checked once per script (windows of win, default
--   64: a caller that needs few slots asks for a small window), taken
--   slots must be ZREMed by the caller (the cursor accounts for them);
--   writes nothing.
-- new_token(ktokens, now): a fresh assignment token "now-counter", unique forever.
-- claim_slot(kslots, kfree, ktokens, s, run, task, now): assign free slot s
--   ({w, i, f}) to task of run with a fresh token; returns {w, i, tok, task}.
-- release_slots(kslots, kfree, run, as): free every slot of assignments as
--   that still holds run#token#task (a slot reassigned since is left alone).
-- window_of(kgroup, kwaiting, defwin): a group's decision fields {policy,
--   max_active, version, window, discard_below, gen} (g[1] nil: no group),
--   its waiting total and the ids of its snapshot window, oldest part first
--   (n_oldest of them; snapshot.lua's window rule); reads only.
-- publish_runs(chan, ev): one PUBLISH on chan of the run events in ev, a
--   list of "STATE#group#id" (storage.ParseRunEvents), space-separated;
--   nothing when chan is '' or ev is empty. Advisory: watchers (runs
--   --watch, client.Watch) re-read the run.
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
local function free_cursor(kfree, kworkers, kslots, now, win)
  win = win or 64
  local c = {buf = {}, i = 1, read = 0, taken = 0, eof = false, alive = {}}
  local function nextfree()
    while true do
      if c.i > #c.buf then
        if c.eof then return nil end
        -- entries already read and taken are gone from the zset
        local from = c.read - c.taken
        c.buf = redis.call('ZRANGE', kfree, from, from + win - 1)
        c.i = 1
        c.read = c.read + #c.buf
        if #c.buf < win then c.eof = true end
        if #c.buf == 0 then return nil end
      end
      local f = c.buf[c.i]
      c.i = c.i + 1
      local w, i = string.match(f, '^(.*)#(%d+)$')
      if w then
        local a = c.alive[w]
        if a == nil then
          local sc = redis.call('ZSCORE', kworkers, w)
          a = (sc and tonumber(sc) > now) or false
          c.alive[w] = a
        end
        if a and redis.call('HGET', kslots, f) == '' then
          return {w = w, i = i, f = f}
        end
      end
    end
  end
  function c.take(k)
    local got = {}
    for _ = 1, k do
      local s = nextfree()
      if not s then return nil, #got end
      got[#got + 1] = s
    end
    c.taken = c.taken + k
    return got, k
  end
  return c
end
local function new_token(ktokens, now)
  return string.format('%d', now) .. '-' .. redis.call('INCR', ktokens)
end
local function claim_slot(kslots, kfree, ktokens, s, run, task, now)
  local tok = new_token(ktokens, now)
  redis.call('HSET', kslots, s.f, run .. '#' .. tok .. '#' .. task)
  redis.call('ZREM', kfree, s.f)
  return {w = s.w, i = s.i, tok = tok, task = task}
end
local function release_slots(kslots, kfree, run, as)
  for _, a in ipairs(as) do
    local f = a.w .. '#' .. a.i
    if redis.call('HGET', kslots, f) == run .. '#' .. a.tok .. '#' .. a.task then
      redis.call('HSET', kslots, f, '')
      redis.call('ZADD', kfree, 0, f)
    end
  end
end
local function flat_assign(list)
  local out = {}
  for _, a in ipairs(list) do
    out[#out + 1] = a.w; out[#out + 1] = a.i; out[#out + 1] = a.tok; out[#out + 1] = tostring(a.task)
  end
  return out
end
local function publish_runs(chan, ev)
  if chan ~= nil and chan ~= '' and #ev > 0 then
    redis.call('PUBLISH', chan, table.concat(ev, ' '))
  end
end
local function window_of(kgroup, kwaiting, defwin)
  local g = redis.call('HMGET', kgroup, 'policy', 'max_active', 'version', 'window', 'discard_below', 'gen')
  if not g[1] then return g, 0, 0, {} end
  local k = tonumber(g[4]) or 0
  if k <= 0 then k = defwin end
  k = math.max(k, tonumber(g[2]) or 1)
  local lo = tonumber(g[5]) or 0
  local from = '-inf'
  if lo > 0 then from = string.format('%d', lo) end
  local total = redis.call('ZCOUNT', kwaiting, from, '+inf')
  local ids
  if total <= 2 * k then
    ids = redis.call('ZRANGEBYSCORE', kwaiting, from, '+inf', 'LIMIT', 0, 2 * k)
    return g, total, #ids, ids
  end
  ids = redis.call('ZRANGEBYSCORE', kwaiting, from, '+inf', 'LIMIT', 0, k)
  local oldest = #ids
  local newest = redis.call('ZREVRANGEBYSCORE', kwaiting, '+inf', from, 'LIMIT', 0, k)
  for i = #newest, 1, -1 do ids[#ids + 1] = newest[i] end
  return g, total, oldest, ids
end

