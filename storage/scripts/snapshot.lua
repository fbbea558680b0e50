-- snapshot: groups, each with its active runs and a bounded window of its
-- waiting runs, in one round trip (read-only). One call reads one or more
-- groups (storage.SnapshotBatch sends up to 16 a call: the clock is read
-- once); the reply is one result (below) or error per group, in order,
-- and stops after the group that took the call's reads (active and
-- window runs) to 2,048 or more: the groups after it are not in the reply
-- (the caller sends them again; the first group is always read).
-- KEYS, five per group: [1] group hash, [2] waiting zset, [3] active zset,
-- [4] the group's waiting-run index (Keys.WaitInfo), [5] the group's
-- launches list (Keys.Launches)
-- ARGV[1] run-hash key prefix (Keys.RunPrefix, same hash tag; see RATIONALE.md),
-- ARGV[2] default window (runs per side, DefaultWindow), ARGV[3] '1' = the
-- waiting runs from the index (what a decision reads), else each run's
-- fields, ARGV[4] launches to return (abi.MaxLaunches), ARGV[5..] run
-- fields to return of each active run (and of each waiting one without
-- the index)
-- returns, per group: {{policy, max_active, version, window, discard_below, gen,
-- paused ('1': the group is paused: the leader decides nothing), params,
-- wake_at, hist, dv}, now_ms, {active runs}, waiting, waiting_total, n_oldest,
-- {launches, newest first: when hist = '1'}}; each active run = HMGET
-- of the fields; waiting = with the index {{ids}, {index entries}} (a run
-- the index lacks, submitted before it existed, gets its entry built from
-- its hash), else {runs}; runs ordered by seq. The waiting runs are those
-- with seq >= discard_below (the older ones are covered by a decision's
-- discard_below and are being drained: drain.lua); the window is all of
-- them when there are at most 2k, else the oldest k then the newest k, k =
-- max(window, max_active); n_oldest = how many window runs are the oldest
-- part.
-- errors: WS_NOT_FOUND (no such group)
-- bound: O(log n + k) for the waiting zset of n runs, plus the active runs
-- and ARGV[4] launches
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local function load(ids, out)
  for _, id in ipairs(ids) do
    out[#out + 1] = redis.call('HMGET', ARGV[1] .. id, unpack(fields))
  end
  return out
end
local now
local function snapshot_one(K)
  local g, total, oldest, ids = window_of(K[1], K[2], tonumber(ARGV[2]))
  if not g[1] then
    return redis.error_reply('WS_NOT_FOUND group does not exist')
  end
  local waiting
  if ARGV[3] == '1' then
    local info = {}
    for at = 1, #ids, 1000 do -- unpack is bounded: HMGET 1,000 at a time
      for _, v in ipairs(redis.call('HMGET', K[4], unpack(ids, at, math.min(at + 999, #ids)))) do
        info[#info + 1] = v
      end
    end
    for i, v in ipairs(info) do
      if not v then
        local r = redis.call('HMGET', ARGV[1] .. ids[i], 'seq', 'priority', 'slots', 'submitted_at', 'attempt',
          'max_attempts', 'not_before', 'labels')
        info[i] = winfo(r[1] or '0', r[2], r[3], r[4], r[5], r[6], r[7], r[8])
      end
    end
    waiting = {ids, info}
  else
    waiting = load(ids, {})
  end
  local launches = {}
  local nl = tonumber(ARGV[4]) or 0
  if nl > 0 and g[10] == '1' then launches = redis.call('LRANGE', K[5], 0, nl - 1) end
  local active = load(redis.call('ZRANGE', K[3], 0, -1), {})
  return {g, now, active, waiting, total, oldest, launches}, #active + #ids
end
if #KEYS == 0 or #KEYS % 5 ~= 0 then
  return redis.error_reply('WS_INVALID snapshot: ' .. #KEYS .. ' keys, want five per group')
end
now = now_ms()
local res, read = {}, 0
for at = 1, #KEYS, 5 do
  if read >= 2048 then break end -- the read budget: the caller sends the rest again
  local r, n = snapshot_one({KEYS[at], KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4]})
  res[#res + 1] = r
  read = read + (n or 0)
end
return res
