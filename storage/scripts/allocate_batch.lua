-- allocate_batch: give up to n LAUNCHED runs, in the given order (the
-- caller passes the head of the launched zset, FIFO by seq), all k of their
-- slots on live workers or none (leader, fenced). A run that does not fit
-- is passed over and the younger ones that fit get slots (backfill), unless
-- it has waited for slots at least the guard (ARGV[6]): then it is held,
-- the call stops there and the slots freed from now on wait for it. With
-- no free slot left the call stops at the next misfit. A run launched with
-- requirements (its field require: apply.lua) takes only slots of workers
-- that carry them and serve its group (_lib.lua Placement), is never held,
-- and a misfit of it stops nothing.
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] workers zset, KEYS[4] slots hash,
-- KEYS[5] free zset, KEYS[6] launched zset, KEYS[7] tokens counter,
-- KEYS[8] the launched runs' index (Keys.LaunchInfo), KEYS[9] the pass
-- stop mark (Keys.AllocStop), KEYS[10..9+n] run hash of run 1..n
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] op id (random per call),
-- ARGV[4] the slot-events channels' prefix ("" = no notification), ARGV[5] run-events
-- channel (publish_runs: RUNNING#group#id per allocated run), ARGV[6]
-- guard ms (a misfit LAUNCHED at least this long ago is held; 0 = every
-- misfit is held: strict FIFO), ARGV[7] pass id ("" = a call on its own),
-- ARGV[8..7+n] run ids, each optionally followed by 0x1e and the free
-- slots ("worker#index", 0x1d-separated) the pass names for it
-- (placement: storage.AllocatePass): the run takes the first k of them
-- still free on live workers it may use (_lib.lua take_named), else the
-- first free slots it may use, as any run
-- A pass (storage.AllocatePass) is several calls of one pass id in one
-- pipeline: a call that stops (a held run, or a misfit with no free slot)
-- sets the stop mark to the pass id (PX 60 s), and a later call of the
-- pass that finds it places nothing (it reports its replayed runs, then
-- ends), so the pipeline stops where the calls one after another would.
-- returns: {{run id, "allocated", {worker, index, token, task, ...}},
--           {run id, "skipped", state or ""},      -- not LAUNCHED (stopped, gone): nothing written
--           {run id, "no_slots", needed, found, held, group, require}} -- a misfit: nothing written for it; held 1 = it
--                                                  -- waited past the guard and the call stopped at it; require: its
--                                                  -- requirements ("k=v" 0x1d-separated, "" = none)
-- in run order; a run after a held one, or after a misfit that found no
-- free slot at all (in this call or an earlier call of its pass), is not
-- in the reply (untouched).
-- errors (nothing written): WS_FENCED, WS_INVALID (arity, a run id twice)
-- writes, per allocated run (as allocate.lua): slot values run#token#task,
-- free zset, run RUNNING + started_at + assign + alloc_op, removed from
-- launched (the call's taken slots out of free, its runs out of launched
-- and the launched index, in one ZREM, ZREM and HDEL at its end; the runs
-- go under pcall, so a command failing halfway still leaves what the
-- runs before it took consistent; the call then fails); then one PUBLISH
-- a worker, on its channel (ARGV[4] .. worker: publish_slots), of
-- "worker#index#run" for each of its allocated runs' task-0 slots,
-- space-separated (storage.ParseSlotEvents: the worker picks the run up at
-- once instead of at its next heartbeat).
-- replay: a run whose alloc_op == op is reported "allocated" with its
-- assignments (never allocated twice); later runs are tried again.
-- the stop mark (KEYS[9]) when a call of a pass stops.
-- bound: O(n · (k + s) + f), s the slots named for a run (its k and a few): n given runs (the caller passes at most storage.AllocChunk), k slots each, f the free-zset entries read once (free_cursor)
local n = #KEYS - 9
if n < 0 or #ARGV ~= 7 + n then
  return redis.error_reply('WS_INVALID allocate batch: ' .. n .. ' run keys for ' .. (#ARGV - 7) .. ' run ids')
end
local guard = tonumber(ARGV[6]) or 0
local pass = ARGV[7]
-- an earlier call of this pass stopped: place nothing (replays still count)
local stopped = pass ~= '' and redis.call('GET', KEYS[9]) == pass
local seen, named = {}, {}
for j = 1, n do
  local id = ARGV[7 + j]
  local sep = string.find(id, '\30', 1, true)
  if sep then
    named[j] = string.sub(id, sep + 1)
    id = string.sub(id, 1, sep - 1)
    ARGV[7 + j] = id
  end
  if seen[id] then
    return redis.error_reply('WS_INVALID allocate batch: run ' .. id .. ' twice')
  end
  seen[id] = true
end
local now = now_ms()
local nows = string.format('%d', now)
local C = {kfree = KEYS[5], kworkers = KEYS[3], kslots = KEYS[4], now = now, P = placement(KEYS[5]), by = {}}
local tok = {key = KEYS[7], n = 0} -- one INCR for the call's tokens
-- the slots taken (out of free) and the runs allocated (out of launched
-- and its index): one ZREM, ZREM and HDEL for the call, written even
-- when a command fails halfway (pcall)
local out, notify, ev, taken, gone = {}, {}, {}, {}, {}
local done, err = pcall(function()
  for j = 1, n do
    local id, key = ARGV[7 + j], KEYS[9 + j]
    local r = redis.call('HMGET', key, 'state', 'slots', 'alloc_op', 'assign', 'group', 'launched_at', 'require')
    if r[1] and r[3] == ARGV[3] then
      out[#out + 1] = {id, 'allocated', flat_assign(parse_assign(r[4]))}
    elseif stopped then
      break
    elseif r[1] ~= 'LAUNCHED' then
      out[#out + 1] = {id, 'skipped', r[1] or ''}
    else
      local k = tonumber(r[2]) or 1
      local req = r[7] or ''
      local got, found
      if named[j] then got = take_named(C, r[5] or '', req, named[j], k) end
      if not got then got, found = cursor_for(C, r[5] or '', req).take(k) end
      if got then
        local as = {}
        for task, s in ipairs(got) do
          as[#as + 1] = claim_slot(KEYS[4], KEYS[5], tok, s, id, task - 1, now, taken)
        end
        redis.call('HSET', key, 'state', 'RUNNING', 'started_at', nows, 'assign', join_assign(as), 'alloc_op', ARGV[3])
        gone[#gone + 1] = id
        slot_note(notify, as[1], id)
        ev[#ev + 1] = 'RUNNING#' .. (r[5] or '') .. '#' .. id
        out[#out + 1] = {id, 'allocated', flat_assign(as)}
      else
        -- a run with requirements is never held (slots freed for it are
        -- not slots others may not take) and, like any run while a worker
        -- has a placement profile, does not stop the call: the runs after
        -- it may take other slots
        -- (preferences are soft: a run with only those is held as any)
        local hard = strip_pref(req)
        local held = hard == '' and now - (tonumber(r[6]) or now) >= guard
        out[#out + 1] = {id, 'no_slots', k, found, held and 1 or 0, r[5] or '', req}
        if held or (found == 0 and hard == '' and not C.P) then -- nothing after it can fit
          if pass ~= '' then redis.call('SET', KEYS[9], pass, 'PX', 60000) end
          break
        end
      end
    end
  end
end)
call_many('ZREM', KEYS[5], taken)
call_many('ZREM', KEYS[6], gone)
call_many('HDEL', KEYS[8], gone)
publish_slots(ARGV[4], notify)
publish_runs(ARGV[5], ev)
if not done then
  return caught(err)
end
return out
