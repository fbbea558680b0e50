-- shared helpers (prepended by Go to every script; defines locals only, runs nothing)
-- now_ms(): Redis TIME in unix ms.
-- parse_assign(s): "worker#index#token#task,..." -> list of {w, i, tok, task}
--   (worker identities may contain '#'; index, token and task never do).
-- pick_free(kfree, kworkers, kslots, k, now[, alive[, P, group, req]]): up to k free slots
--   ({w, i, f}) on live workers (heartbeat expiry > now) that may take a
--   run of group with requirements req (may_place), in free-zset order,
--   reading the free zset in windows of max(2k, 16) until k are found;
--   alive (optional) caches worker liveness across calls; writes nothing.
-- free_cursor(kfree, kworkers, kslots, now[, win[, deferred[, P, group, req]]]): an iterator over the
--   usable free slots for a batch of allocations (with P, those may_place
--   allows for group and req): c.take(k) returns k slots
--   ({w, i, f}) or nil and the count found when fewer remain (what it
--   found is given back, so a smaller run may still take it); each free
--   zset entry is read and checked once per script (windows of win, default
--   64: a caller that needs few slots asks for a small window), taken
--   slots must be ZREMed by the caller (the cursor accounts for them;
--   deferred = true: the caller ZREMs them at its end, in one call, and
--   the cursor reads past them); writes nothing.
-- Placement (worker labels and groups; keyspace.Keys.Placement, the hash
--   beside free, named from free's key): identity -> "labels 0x1e groups"
--   of each worker that has any ("k=v" pairs 0x1d-separated; group names or
--   patterns with '*', comma-separated). Such a worker's free slots have
--   score 1 in free, the others' 0, so a run without requirements takes an
--   open worker's slot first, and a run with requirements reads only the
--   score-1 slots. A run's requirements are "k=v" pairs 0x1d-separated:
--   the worker must carry every one; a worker with groups takes only runs
--   of a group one of them matches.
-- drop_profile(kp, w): delete worker w's placement profile from hash kp
--   (and count it out of '#groups').
-- merge_req(a, b): requirements a and b as one ("k=v" 0x1d-separated,
--   sorted; a key in both: b's).
-- placement(kfree): nil when no worker has a profile (one EXISTS), else
--   {key, prof = {}, alive = {}, groups} for a call: prof caches each worker's
--   parsed profile (false: none), alive its liveness (free_cursor), groups
--   whether a worker serves only some groups (the hash's field '#groups'
--   counts those workers; no identity has no '#').
-- may_place(P, w, group, req): whether worker w may take a slot of a run of
--   group with requirements req (parse_req: nil = none).
-- cursor_for(C, group, req_s): the call's free cursor for a run of group
--   with requirements req_s ('' or nil = none; with preferences, its take
--   tries take_pref first, then the cursor of the rest); C = {kfree, kworkers,
--   kslots, now, win, P = placement(kfree), by = {}}: one cursor for every
--   run when no worker has a profile, else one per requirements (and per
--   group while a worker serves only some groups).
-- parse_req(s): requirements "k=v" 0x1d-separated as a list of {k, v} (nil:
--   none) and whether they hold the flag "@same=1" (a run's slots all on
--   one worker: a cursor of such runs takes k adjacent slots of one worker,
--   and after a k that did not fit answers any k' >= k at once, so a call's
--   misfits read the free zset once, not once each), and its preferences
--   "~k=weight:v" as a list of {k, v, weight} (nil: none): soft, they never
--   narrow the workers a run may use.
-- strip_pref(s): requirements s without their preferences.
-- take_pref(C, group, req, prefs, k): k free slots of one live worker that
--   may take the run and carries some of its preferences (the highest sum
--   of weights first, then worker identity order), or nil (nothing taken)
--   when no such worker has k; reads the profiled workers' free slots
--   (score 1) in windows of 64, once a call (C.pw), until a worker that
--   carries every preference has k free (else all of them), and, as
--   take_named, makes the call's cursors recheck a slot they gave back.
--   Writes nothing.
-- take_named(C, group, req_s, list, k): k of the slots in list ("worker#index",
--   0x1d-separated: the slots a pass's placement named for a run) that are
--   free (in free, no run) on live workers that may take the run, in list
--   order, or nil (nothing taken) when fewer are; the call's cursors then
--   recheck a slot they gave back (c.recheck). Writes nothing.
-- spared(kworker, since): whether a worker whose heartbeat expired is still
--   taken for alive: since (ms since the leader's term began or Redis last
--   refused the leader a write at maxmemory; -1 never) is less than its
--   heartbeat TTL (its hash kworker, field ttl): its heartbeats may have
--   been refused or lost with a failed master, so it gets one TTL to send
--   one (reap.lua, restore_check.lua, restore_apply.lua judge alike).
-- new_token(ktokens, now): a fresh assignment token "now-counter", unique
--   forever. ktokens is the counter's key, or {key = it, n = 0} for a
--   script that makes many tokens: one INCR for all of them ("now-counter.n").
-- claim_slot(kslots, kfree, ktokens, s, run, task, now[, taken]): assign free slot s
--   ({w, i, f}) to task of run with a fresh token; returns {w, i, tok, task}.
--   With taken (a list) the slot is not ZREMed from kfree but added to it,
--   for the caller's one ZREM (call_many; a slot left in kfree by a call
--   that failed before it is skipped by every reader: its value is not '').
-- call_many(cmd, key, list): cmd key list... in calls of at most 512
--   members (a variadic ZREM, HDEL, SREM of a script's collected members).
-- add_once(list, v): append v to list unless it is there (list is also
--   the set of its values: list[v] = true).
-- caught(err): the error reply of an error caught by pcall (a redis.call
--   error is a table {err = message}; a Lua error a string).
-- release_slots(kslots, kfree, run, as[, S]): free every slot of assignments as
--   that still holds run#token#task (a slot reassigned since is left alone);
--   a draining worker's slot is freed but not offered again (not put back
--   in free: Keys.Draining, derived from kfree's prefix). With S (a table a
--   script's many releases share: {drain = {}, free = {}}) each worker's
--   draining check is read once (S.drain) and the slots to offer again are
--   collected in S.free (score, member pairs) for the caller's one ZADD.
--   A profiled worker's slot goes back with score 1 (Placement).
-- group_view(kgroup): a group's decision fields {policy, max_active,
--   version, window, discard_below, gen, paused, params, wake_at, hist
--   ('1': its launches are recorded, apply.lua), dv (the version the
--   leader's last viewable apply left, apply.lua)}, one HMGET.
-- window_of(kgroup, kwaiting, defwin[, g]): a group's decision fields
--   (group_view; g: already read) (g[1] nil: no group),
--   its waiting total and the ids of its snapshot window, oldest part first
--   (n_oldest of them; snapshot.lua's window rule); reads only.
-- slot_note(n, s, run): add the slot-events entry "worker#index#run" of
--   slot s ({w, i}: an assignment or a free slot) to n, a table of the
--   call's slot events by worker (n[w] its entries, n[1..] the workers in
--   the order first noted).
-- publish_slots(prefix, n): one PUBLISH a worker of its entries in n
--   (space-separated, storage.ParseSlotEvents) on prefix .. worker (its
--   own channel, keyspace.Keys.SlotEvents); nothing when prefix is ''.
-- publish_runs(chan, ev): one PUBLISH on chan of the run events in ev, a
--   list of "STATE#group#id" (storage.ParseRunEvents), space-separated;
--   nothing when chan is '' or ev is empty. Advisory: watchers (runs
--   --watch, client.Watch) re-read the run.
-- winfo(seq, prio, slots, sub, att, maxa, nb, labels): a run's entry in
--   its group's waiting-run index (Keys.WaitInfo): "seq,prio,slots,sub",
--   then ",attempt,max_attempts,not_before,labels" only when a run has
--   labels, a retry policy or a not_before (storage.parseWaitInfo).
-- new_run(K, A[, pub, now]): write a new WAITING run, with K and A laid
--   out as submit.lua's single-run K[1..11] and A[1..15] (its checks done
--   by the caller): the group made if new (its run defaults read), the
--   run hash, runs; a due run into waiting + index, version+1, dirty,
--   PUBLISH of the group; a run with not_before ahead parked (PUBLISH
--   storage.TimerEvent); its WAITING run event. With pub (a table), the
--   three messages are not sent but collected for the caller to send once
--   for many runs (pub.work = a group to PUBLISH on the work channel,
--   pub.timer = true, pub.ev = run events), and so are the groups to mark
--   dirty (pub.dirty, a list that is also a set: one SADD for them), and
--   now (ms) is the caller's clock; pub.seqs (optional) is how many runs
--   the call may write: their seqs come from one INCRBY of it; with
--   pub.groups (a table) a group's run defaults are read once a call, and
--   with pub.bump (a table) the version bumps are counted there (key ->
--   due runs, the keys also as a list) for the caller's one HINCRBY a group.
--   Returns seq, now, due (1|0), timeout_ms, max_attempts.
-- park(kdelayed, ktimers, group, id, due): a WAITING run waits in the
--   group's delayed zset until due (ms); the group's timer is lowered to
--   due (ZADD LT adds it when absent).
-- retry_at(att, maxa, backoff, fin[, salt]): when attempt att + 1 of a run whose
--   attempt att failed at fin (ms) is due, nil when att >= maxa. backoff
--   is "base_ms,cap_ms": min(cap, base·2^(att-1)), half of it fixed and
--   half spread by the clock's microseconds and salt (a script retrying
--   many runs at once gives each its own: equal jitter).
-- attempt_log(hist, n, worker, started, fin, outcome, reason): the run's
--   attempts field with attempt n appended (entries 0x1e-separated, fields
--   n, worker, started_ms, finished_ms, outcome, reason 0x1f-separated;
--   the last 20 kept; storage.parseAttempts).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function parse_assign(s)
  local out = {}
  if not s or s == '' then return out end
  for e in string.gmatch(s, '[^,]+') do
    local w, i, tok, task = string.match(e, '^(.*)#(%d+)#([^#]+)#(%d+)$')
    if w then out[#out + 1] = {w = w, i = i, tok = tok, task = tonumber(task), ts = task} end
  end
  return out
end
local function join_assign(list)
  if #list == 1 then -- (the common one-slot run: no table of parts)
    local a = list[1]
    return a.w .. '#' .. a.i .. '#' .. a.tok .. '#' .. (a.ts or string.format('%d', a.task))
  end
  local parts = {}
  for _, a in ipairs(list) do
    parts[#parts + 1] = a.w .. '#' .. a.i .. '#' .. a.tok .. '#' .. (a.ts or string.format('%d', a.task))
  end
  return table.concat(parts, ',')
end
local function parse_req(s)
  if not s or s == '' then return nil, false end
  local out, same, prefs = {}, false, nil
  for pair in string.gmatch(s, '[^\29]+') do
    local k, v = string.match(pair, '^([^=]+)=(.*)$')
    if k == '@same' then
      same = true
    elseif k and string.byte(k) == 126 then -- '~': a preference
      local w, pv = string.match(v, '^(%d+):(.*)$')
      if w then
        prefs = prefs or {}
        prefs[#prefs + 1] = {string.sub(k, 2), pv, tonumber(w)}
      end
    elseif k then
      out[#out + 1] = {k, v}
    end
  end
  if #out == 0 then out = nil end
  return out, same, prefs
end
local function strip_pref(s)
  if not s or not string.find(s, '~', 1, true) then return s or '' end
  local out = {}
  for pair in string.gmatch(s, '[^\29]+') do
    if string.byte(pair) ~= 126 then out[#out + 1] = pair end
  end
  return table.concat(out, '\29')
end
local function drop_profile(kp, w)
  local v = redis.call('HGET', kp, w)
  if not v then return end
  redis.call('HDEL', kp, w)
  if string.match(v, '\30.') and redis.call('HINCRBY', kp, '#groups', -1) <= 0 then redis.call('HDEL', kp, '#groups') end
end
local function merge_req(a, b)
  local m, keys = {}, {}
  for _, s in ipairs({a, b}) do
    for pair in string.gmatch(s, '[^\29]+') do
      local k = string.match(pair, '^([^=]+)=')
      if k then
        if not m[k] then keys[#keys + 1] = k end
        m[k] = pair
      end
    end
  end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = m[k] end
  return table.concat(out, '\29')
end
local function placement(kfree)
  local kp = string.sub(kfree, 1, #kfree - 4) .. 'placement'
  if redis.call('EXISTS', kp) == 0 then return nil end
  -- groups: whether a worker serves only some groups ('#groups' counts them)
  return {key = kp, prof = {}, alive = {}, has = {}, groups = redis.call('HEXISTS', kp, '#groups') == 1}
end
local function glob_match(pat, s)
  if not string.find(pat, '*', 1, true) then return pat == s end
  local lp = string.gsub(pat, '[%^%$%(%)%%%.%[%]%+%-%?]', '%%%0')
  lp = string.gsub(lp, '%*', '.*')
  return string.match(s, '^' .. lp .. '$') ~= nil
end
local function may_place(P, w, group, req)
  if not P then return req == nil end
  local p = P.prof[w]
  if p == nil then
    p = false
    local v = redis.call('HGET', P.key, w)
    if v then
      local ls, gs = string.match(v, '^([^\30]*)\30(.*)$')
      p = {labels = {}, groups = nil}
      for pair in string.gmatch(ls or '', '[^\29]+') do
        local k, val = string.match(pair, '^([^=]+)=(.*)$')
        if k then p.labels[k] = val end
      end
      if gs and gs ~= '' then
        p.groups = {}
        for g in string.gmatch(gs, '[^,]+') do p.groups[#p.groups + 1] = g end
      end
    end
    P.prof[w] = p
  end
  if not p then return req == nil end
  if p.groups then
    local ok = false
    for _, pat in ipairs(p.groups) do
      if glob_match(pat, group) then
        ok = true
        break
      end
    end
    if not ok then return false end
  end
  if req then
    for _, kv in ipairs(req) do
      if p.labels[kv[1]] ~= kv[2] then return false end
    end
  end
  return true
end
-- free_range(kfree, from, n, placed): n free-zset entries from offset from,
-- of every slot or (placed) of the score-1 slots of profiled workers only
local function free_range(kfree, from, n, placed)
  if placed then
    return redis.call('ZRANGEBYSCORE', kfree, 1, '+inf', 'LIMIT', from, n)
  end
  return redis.call('ZRANGE', kfree, from, from + n - 1)
end
local function pick_free(kfree, kworkers, kslots, k, now, alive, P, group, req)
  local got = {}
  if k <= 0 then return got end
  alive = alive or {}
  -- free holds exactly the free slots (every script that frees a slot adds
  -- it, every script that assigns or deletes one removes it), so only slots
  -- of dead, not yet reaped workers (and, with requirements or profiled
  -- workers, slots the run may not take) are skipped: read a window of it, not all.
  local win = math.max(2 * k, 16)
  local off = 0
  while true do
    local fs = free_range(kfree, off, win, req ~= nil)
    for _, f in ipairs(fs) do
      local w, i = string.match(f, '^(.*)#(%d+)$')
      if w then
        local a = alive[w]
        if a == nil then
          local sc = redis.call('ZSCORE', kworkers, w)
          a = (sc and tonumber(sc) > now) or false
          alive[w] = a
        end
        if a and (P == nil and req == nil or may_place(P, w, group, req)) and redis.call('HGET', kslots, f) == '' then
          got[#got + 1] = {w = w, i = i, f = f}
          if #got == k then return got end
        end
      end
    end
    if #fs < win then return got end
    off = off + win
  end
end
local function free_cursor(kfree, kworkers, kslots, now, win, deferred, P, group, req)
  win = win or 64
  local c = {buf = {}, i = 1, read = 0, taken = 0, eof = false, alive = P and P.alive or {}, back = {}, deferred = deferred}
  local filter = P ~= nil or req ~= nil
  local function nextfree()
    while #c.back > 0 do
      local s = c.back[#c.back]
      c.back[#c.back] = nil
      -- given back by a run that did not fit; a named placement
      -- (take_named) may have taken it since
      if not c.recheck or redis.call('HGET', kslots, s.f) == '' then return s end
    end
    while true do
      if c.i > #c.buf then
        if c.eof then return nil end
        -- entries already read and taken are gone from the zset (unless
        -- their ZREM is deferred to the caller's one call)
        local from = c.deferred and c.read or c.read - c.taken
        c.buf = free_range(kfree, from, win, req ~= nil)
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
        if a and (not filter or may_place(P, w, group, req)) and redis.call('HGET', kslots, f) == '' then
          return {w = w, i = i, f = f}
        end
      end
    end
  end
  -- same worker: k consecutive slots of one worker (a worker's free slots
  -- are adjacent in free: equal scores sort by member, "worker#index");
  -- the others read on the way are given back for smaller runs
  local function take_same(k)
    -- a call frees no slot: once k did not fit, no k' >= k does (the
    -- cursor is read once a call, not once a run of it)
    if c.same_short and k >= c.same_short then return nil, #c.back end
    local cur, w0, skipped = {}, nil, {}
    while #cur < k do
      local s = nextfree()
      if not s then
        for _, x in ipairs(cur) do skipped[#skipped + 1] = x end
        for j = #skipped, 1, -1 do c.back[#c.back + 1] = skipped[j] end
        c.same_short = k
        return nil, #skipped
      end
      if s.w ~= w0 then
        for _, x in ipairs(cur) do skipped[#skipped + 1] = x end
        cur, w0 = {}, s.w
      end
      cur[#cur + 1] = s
    end
    for j = #skipped, 1, -1 do c.back[#c.back + 1] = skipped[j] end
    c.taken = c.taken + k
    return cur, k
  end
  function c.take(k)
    if c.same and k > 1 then return take_same(k) end
    local got = {}
    for _ = 1, k do
      local s = nextfree()
      if not s then
        -- not enough: give back what was found, for a smaller run
        for j = #got, 1, -1 do c.back[#c.back + 1] = got[j] end
        return nil, #got
      end
      got[#got + 1] = s
    end
    c.taken = c.taken + k
    return got, k
  end
  return c
end
local function take_named(C, group, req_s, list, k)
  local got, req = {}, parse_req(req_s)
  if not C.alive then C.alive = C.P and C.P.alive or {} end
  local alive = C.alive
  C.named = true
  for _, c in pairs(C.by) do c.recheck = true end
  for f in string.gmatch(list, '[^\29]+') do
    local w, i = string.match(f, '^(.*)#(%d+)$')
    if w then
      local a = alive[w]
      if a == nil then
        local sc = redis.call('ZSCORE', C.kworkers, w)
        a = (sc and tonumber(sc) > C.now) or false
        alive[w] = a
      end
      if a and (C.P == nil and req == nil or may_place(C.P, w, group, req)) and redis.call('HGET', C.kslots, f) == ''
          and redis.call('ZSCORE', C.kfree, f) then
        got[#got + 1] = {w = w, i = i, f = f}
        if #got == k then return got end
      end
    end
  end
  return nil
end
local function pref_more(C)
  -- the next window of the profiled workers' free slots (score 1),
  -- grouped by worker (a worker's are adjacent: equal scores sort by
  -- member, "worker#index"); taken ones stay in free until the call's end
  local W = C.pw
  local fs = redis.call('ZRANGEBYSCORE', C.kfree, 1, '+inf', 'LIMIT', W.read, 64)
  W.read = W.read + #fs
  W.eof = #fs < 64
  for _, f in ipairs(fs) do
    local w, i = string.match(f, '^(.*)#(%d+)$')
    if w then
      local last = W.list[#W.list]
      if not last or last.w ~= w then
        last = {w = w, slots = {}}
        W.list[#W.list + 1] = last
      end
      last.slots[#last.slots + 1] = {w = w, i = i, f = f}
    end
  end
end
local function take_pref(C, group, req, prefs, k)
  local P = C.P
  if not P then return nil end -- no worker carries a label
  if not C.pw then
    C.pw = {list = {}, read = 0, eof = false}
    if not C.alive then C.alive = P.alive end
    pref_more(C)
  end
  local full = 0
  for _, p in ipairs(prefs) do full = full + p[3] end
  while true do
    local cands = {}
    for pos, x in ipairs(C.pw.list) do
      if #x.slots - (x.at or 1) + 1 >= k then
        local a = C.alive[x.w]
        if a == nil then
          local sc = redis.call('ZSCORE', C.kworkers, x.w)
          a = (sc and tonumber(sc) > C.now) or false
          C.alive[x.w] = a
        end
        if a and may_place(P, x.w, group, req) then
          local score, labels = 0, P.prof[x.w] and P.prof[x.w].labels or {}
          for _, p in ipairs(prefs) do
            if labels[p[1]] == p[2] then score = score + p[3] end
          end
          if score > 0 then cands[#cands + 1] = {x = x, score = score, pos = pos} end
        end
      end
    end
    table.sort(cands, function(a, b)
      if a.score ~= b.score then return a.score > b.score end
      return a.pos < b.pos
    end)
    for _, c in ipairs(cands) do
      -- the best worker read so far with k free; one that carries every
      -- preference ends the search, any other only once all are read
      if c.score < full and not C.pw.eof then break end
      -- (x.at: its slots before it are taken: a call frees none, and
      -- what this returns the caller claims)
      local got, x = {}, c.x
      for j = x.at or 1, #x.slots do
        local sl = x.slots[j]
        if redis.call('HGET', C.kslots, sl.f) == '' then
          got[#got + 1] = sl
          if #got == k then
            x.at = j + 1
            C.named = true
            for _, cur in pairs(C.by) do cur.recheck = true end
            return got
          end
        elseif #got == 0 then
          x.at = j + 1
        end
      end
    end
    if C.pw.eof then return nil end
    pref_more(C)
  end
end
local function cursor_for(C, group, req_s)
  if req_s and string.find(req_s, '~', 1, true) then
    -- preferences: a worker that carries them first, else as without
    local c = C.by['~' .. group .. '\0' .. req_s]
    if not c then
      local req, _, prefs = parse_req(req_s)
      local base = cursor_for(C, group, strip_pref(req_s))
      c = {}
      function c.take(k)
        local got = prefs and take_pref(C, group, req, prefs, k)
        if got then return got, k end
        return base.take(k)
      end
      C.by['~' .. group .. '\0' .. req_s] = c
    end
    return c
  end
  local sig = ''
  if C.P then
    -- one cursor per group only while a worker serves some groups
    sig = (C.P.groups and group or '') .. '\0' .. (req_s or '')
  elseif req_s and req_s ~= '' then
    sig = '\0' .. req_s
  end
  local c = C.by[sig]
  if not c then
    local req, same = parse_req(req_s)
    c = free_cursor(C.kfree, C.kworkers, C.kslots, C.now, C.win, true, C.P, group, req)
    c.recheck, c.same = C.named, same
    C.by[sig] = c
  end
  return c
end
local function spared(kworker, since)
  return since >= 0 and since < tonumber(redis.call('HGET', kworker, 'ttl') or '0')
end
local function new_token(ktokens, now)
  if type(ktokens) == 'table' then
    -- "now-base." once a call, then the counter (string.format: a number
    -- concatenated is formatted with %.14g, slower)
    ktokens.pre = ktokens.pre or string.format('%d-%d.', now, redis.call('INCR', ktokens.key))
    ktokens.n = ktokens.n + 1
    return ktokens.pre .. string.format('%d', ktokens.n)
  end
  return string.format('%d-%d', now, redis.call('INCR', ktokens))
end
local function claim_slot(kslots, kfree, ktokens, s, run, task, now, taken)
  local tok = new_token(ktokens, now)
  local ts = string.format('%d', task)
  redis.call('HSET', kslots, s.f, run .. '#' .. tok .. '#' .. ts)
  if taken then taken[#taken + 1] = s.f else redis.call('ZREM', kfree, s.f) end
  return {w = s.w, i = s.i, tok = tok, task = task, ts = ts}
end
local function add_once(list, v)
  if not list[v] then list[v] = true; list[#list + 1] = v end
end
local function caught(err)
  return redis.error_reply(type(err) == 'table' and tostring(err.err) or tostring(err))
end
local function call_many(cmd, key, list)
  for i = 1, #list, 512 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 511, #list)))
  end
end
local function release_slots(kslots, kfree, run, as, S)
  -- (with S, the key is made once a call)
  local kdrain = S and S.kdrain or string.sub(kfree, 1, #kfree - 4) .. 'draining'
  if S then S.kdrain = kdrain end
  for _, a in ipairs(as) do
    local f = a.w .. '#' .. a.i
    if redis.call('HGET', kslots, f) == run .. '#' .. a.tok .. '#' .. (a.ts or string.format('%d', a.task)) then
      redis.call('HSET', kslots, f, '')
      local d = S and S.drain[a.w]
      if d == nil then
        d = redis.call('SISMEMBER', kdrain, a.w)
        if S then S.drain[a.w] = d end
      end
      if d == 0 then
        -- score 1: a profiled worker's slot (placement); the check is one
        -- EXISTS a call, and a HEXISTS a worker only when some worker has a profile
        local P
        if S then
          if S.P == nil then S.P = placement(kfree) or false end
          P = S.P or nil
        else
          P = placement(kfree)
        end
        local sc = 0
        if P then
          if P.has[a.w] == nil then P.has[a.w] = redis.call('HEXISTS', P.key, a.w) == 1 end
          if P.has[a.w] then sc = 1 end
        end
        if S then
          S.free[#S.free + 1] = sc
          S.free[#S.free + 1] = f
        else
          redis.call('ZADD', kfree, sc, f)
        end
      end
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
local function slot_note(n, s, run)
  local l = n[s.w]
  if not l then l = {}; n[s.w] = l; n[#n + 1] = s.w end
  l[#l + 1] = s.w .. '#' .. s.i .. '#' .. run
end
local function publish_slots(prefix, n)
  if prefix == nil or prefix == '' then return end
  for _, w in ipairs(n) do
    redis.call('PUBLISH', prefix .. w, table.concat(n[w], ' '))
  end
end
local function publish_runs(chan, ev)
  if chan ~= nil and chan ~= '' and #ev > 0 then
    redis.call('PUBLISH', chan, table.concat(ev, ' '))
  end
end
local function group_view(kgroup)
  return redis.call('HMGET', kgroup, 'policy', 'max_active', 'version', 'window', 'discard_below', 'gen', 'paused',
    'params', 'wake_at', 'hist', 'dv')
end
local function window_of(kgroup, kwaiting, defwin, g)
  g = g or group_view(kgroup)
  if not g[1] then return g, 0, 0, {} end
  local k = tonumber(g[4]) or 0
  if k <= 0 then k = defwin end
  k = math.max(k, tonumber(g[2]) or 1)
  local lo = tonumber(g[5]) or 0
  local from = '-inf'
  if lo > 0 then from = string.format('%d', lo) end
  -- one read when the window holds the whole queue (the count is then
  -- the read's), else the count and the newest part too
  local ids = redis.call('ZRANGEBYSCORE', kwaiting, from, '+inf', 'LIMIT', 0, 2 * k + 1)
  if #ids <= 2 * k then
    return g, #ids, #ids, ids
  end
  local total = redis.call('ZCOUNT', kwaiting, from, '+inf')
  for i = #ids, k + 1, -1 do ids[i] = nil end
  local oldest = #ids
  local newest = redis.call('ZREVRANGEBYSCORE', kwaiting, '+inf', from, 'LIMIT', 0, k)
  for i = #newest, 1, -1 do ids[#ids + 1] = newest[i] end
  return g, total, oldest, ids
end

local function park(kdelayed, ktimers, group, id, due)
  local d = string.format('%d', due)
  redis.call('ZADD', kdelayed, d, id)
  redis.call('ZADD', ktimers, 'LT', d, group)
end
local function retry_at(att, maxa, backoff, fin, salt)
  if att >= maxa then return nil end
  local base, cap = string.match(backoff or '', '^(%d+),(%d+)$')
  base, cap = tonumber(base) or 1000, tonumber(cap) or 600000
  local d = base * 2 ^ math.min(att - 1, 40)
  if d > cap then d = cap end
  local half = math.floor(d / 2)
  local us = tonumber(redis.call('TIME')[2])
  return fin + half + (us * 7919 + (salt or 0) * 104729) % (d - half + 1)
end
local function attempt_log(hist, n, worker, started, fin, outcome, reason)
  local e = table.concat({n, worker, started or '', fin, outcome, (string.gsub(reason or '', '[\30\31]', ' '))}, '\31')
  local parts = {}
  if hist and hist ~= '' then
    for p in string.gmatch(hist, '[^\30]+') do parts[#parts + 1] = p end
  end
  parts[#parts + 1] = e
  while #parts > 20 do table.remove(parts, 1) end
  return table.concat(parts, '\30')
end
local function winfo(seq, prio, slots, sub, att, maxa, nb, labels)
  local e = seq .. ',' .. (prio or '0') .. ',' .. (slots or '1') .. ',' .. (sub or '0')
  if (labels and labels ~= '') or (tonumber(maxa) or 1) > 1 or (tonumber(nb) or 0) > 0 then
    e = e .. ',' .. (att or '1') .. ',' .. (maxa or '1') .. ',' .. (nb or '0') .. ',' .. (labels or '')
  end
  return e
end
local function new_run(K, A, pub, now)
  local slots = tonumber(A[3]) or 1
  -- the group's run defaults: read once a call per group (nothing else in
  -- the call writes them)
  local gd = pub and pub.groups and pub.groups[K[3]]
  if not gd then
    gd = redis.call('HMGET', K[3], 'name', 'run_timeout_ms', 'max_attempts', 'backoff', 'paused')
    if not gd[1] then
      redis.call('SADD', K[2], A[1])
      redis.call('HSET', K[3], 'name', A[1], 'policy', 'wait', 'max_active', 1, 'version', 0,
        'gen', redis.call('INCR', K[8]))
      gd = {A[1]}
    end
    if pub and pub.groups then pub.groups[K[3]] = gd end
  end
  now = now or now_ms()
  local seq
  if pub and pub.seqs then
    -- the call's seqs: one INCRBY of its runs for all of them (a run that
    -- is not written leaves a gap: seqs order, they do not count)
    if not pub.seq then pub.seq = redis.call('INCRBY', K[1], pub.seqs) - pub.seqs end
    pub.seq = pub.seq + 1
    seq = pub.seq
  else
    seq = redis.call('INCR', K[1])
  end
  -- decimal strings once (a number passed to redis.call or concatenated
  -- is formatted with %.14g each time, slower)
  local seqs = string.format('%d', seq)
  local nows = pub and pub.nows or string.format('%d', now) -- with pub: the call's one clock
  if pub then pub.nows = nows end
  local slotss = string.format('%d', slots)
  local f = {'id', A[2], 'group', A[1], 'seq', seqs, 'state', 'WAITING', 'slots', slotss, 'submitted_at', nows,
    'op', A[7]}
  -- a field at its default is not written (every reader takes a missing
  -- priority, payload or duration for 0, '' and 0: a hashtable-encoded
  -- run pays some 80 bytes a field)
  if A[4] ~= '0' and A[4] ~= '' then f[#f + 1] = 'priority'; f[#f + 1] = A[4] end
  if A[5] ~= '' then f[#f + 1] = 'payload'; f[#f + 1] = A[5] end
  if A[6] ~= '0' and A[6] ~= '' then f[#f + 1] = 'duration_ms'; f[#f + 1] = A[6] end
  local timeout = A[11] ~= '' and A[11] or gd[2]
  if timeout and timeout ~= '0' then f[#f + 1] = 'timeout_ms'; f[#f + 1] = timeout end
  local maxa = tonumber(A[12] ~= '' and A[12] or gd[3]) or 1
  if maxa > 1 then
    f[#f + 1] = 'max_attempts'; f[#f + 1] = maxa
    f[#f + 1] = 'backoff'; f[#f + 1] = A[13] ~= '' and A[13] or gd[4] or A[14]
  end
  if A[15] and A[15] ~= '' then f[#f + 1] = 'labels'; f[#f + 1] = A[15] end
  if A[20] and A[20] ~= '' then
    -- its own requirements; its group says it has runs with some, once
    f[#f + 1] = 'rreq'; f[#f + 1] = A[20]
    if not gd.rreq then
      redis.call('HSET', K[3], 'rreq', '1')
      gd.rreq = true
    end
  end
  if A[21] and A[21] ~= '' then f[#f + 1] = 'tp'; f[#f + 1] = A[21] end
  local nb = tonumber(A[10]) or 0
  local due = 1
  if nb > now then
    due = 0
    f[#f + 1] = 'not_before'; f[#f + 1] = string.format('%d', nb)
  end
  redis.call('HSET', K[6], unpack(f))
  redis.call('ZADD', K[7], seqs, A[2])
  if due == 1 then
    redis.call('ZADD', K[4], seqs, A[2])
    redis.call('HSET', K[9], A[2], winfo(seqs, A[4], slotss, nows, '1', maxa, '0', A[15]))
    if pub and pub.bump then
      -- one HINCRBY a group for the call (pub.bump: key -> runs, and the keys in order)
      if not pub.bump[K[3]] then pub.bump[K[3]] = 0; pub.bump[#pub.bump + 1] = K[3] end
      pub.bump[K[3]] = pub.bump[K[3]] + 1
    else
      redis.call('HINCRBY', K[3], 'version', 1)
    end
    if gd[5] ~= '1' then -- a paused group is not decided: nothing to wake
      if pub then
        pub.work = A[1]
        add_once(pub.dirty, A[1])
      else
        redis.call('SADD', K[5], A[1])
        redis.call('PUBLISH', A[8], A[1])
      end
    end
  else
    park(K[10], K[11], A[1], A[2], nb)
    if pub then pub.timer = true else redis.call('PUBLISH', A[8], '#timer') end -- storage.TimerEvent
  end
  if pub then
    pub.ev[#pub.ev + 1] = 'WAITING#' .. A[1] .. '#' .. A[2]
  else
    publish_runs(A[9], {'WAITING#' .. A[1] .. '#' .. A[2]})
  end
  return seq, now, due, tonumber(timeout) or 0, maxa
end
