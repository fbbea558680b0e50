-- submit: add WAITING runs to groups (client write, unfenced). One call
-- carries one or more runs (storage.SubmitBatch sends up to 64 a call):
-- the clock is read once, the seqs come from one INCRBY, a group's run
-- defaults are read once and its version bumped once (by its due runs),
-- the groups to decide go into dirty in one SADD, and the call's messages
-- go out once (one PUBLISH
-- on the work channel, one of storage.TimerEvent if a run was parked, one
-- of all the run events); each run is checked and written on its own (its
-- error leaves it alone and the others go on).
-- KEYS (shared): [1] seq, [2] groups set, [3] dirty set, [4] runs zset,
-- [5] the group incarnation counter (Keys.GroupGen), [6] timers zset; then
-- per run: its group's hash, waiting zset, waiting-run index
-- (Keys.WaitInfo) and delayed zset, the run hash, and (when its args say
-- so) the idempotency key's key (Keys.Idempotency)
-- ARGV (shared): [1] work channel (PUBLISH of a group: the coordinator
-- wakes; advisory), [2] run-events channel (publish_runs: WAITING#group#id
-- of each run), [3] the default backoff, [4] run-hash key prefix
-- (Keys.RunPrefix); then per run: its layout ('0' plain, '1' with an
-- idempotency key, '2' and '3' the same with its own requirements), group, run id, slots (>= 1), priority, payload, duration_ms,
-- op id (random per call), not_before ms (0 = none; at or before now =
-- none), timeout_ms ('' = the group's run_timeout_ms, if any),
-- max_attempts ('' = the group's, else 1), backoff "base_ms,cap_ms" ('' =
-- the group's, else the default), labels (storage.encodeLabels; '' =
-- none); with an idempotency key three more: its lifetime in ms, the
-- request's fingerprint (its group and run settings), '1' when the caller
-- chose the run id; with requirements (layouts '2', '3') one more, last:
-- them ("k=v" 0x1d-separated, sorted, valid; "@same=1" first, its
-- preferences "~k=weight:v" last: the run's field rreq, and its
-- group gets rreq = 1, so the apply that launches its runs reads theirs);
-- with a trace context (layouts '4' to '7': the bit 4 of the layout) one
-- more, last of all: the submit span's W3C traceparent (the run's tp)
-- returns: per run, in order, its result (below) or its error reply
-- per run, in the single-run layout submit_one reads: K[1] seq, K[2]
-- groups, K[3] group hash, K[4] waiting, K[5] dirty, K[6] run hash, K[7]
-- runs, K[8] group gen, K[9] waiting-run index, K[10] delayed, K[11]
-- timers, K[12] (optional) idempotency key; A[1] group, A[2] run id, A[3]
-- slots, A[4] priority, A[5] payload, A[6] duration_ms, A[7] op id, A[8]
-- work channel, A[9] run-events channel, A[10] not_before, A[11]
-- timeout_ms, A[12] max_attempts, A[13] backoff, A[14] the default
-- backoff, A[15] labels, A[16] the idempotency key's lifetime, A[17]
-- run-hash prefix, A[18] fingerprint, A[19] '1' = the caller chose the
-- id, A[20] its requirements (nil = none), A[21] its traceparent (nil =
-- none)
-- returns: {seq, submitted_at_ms, replayed (0|1), run id, due (1 = in the
-- waiting zset, 0 = delayed until not_before), timeout_ms, max_attempts}
-- (a replay returns the first three and the id)
-- idempotency: with KEYS[12], a key that names a run that still exists
-- returns that run (replayed = 1, its id) when the request's fingerprint is
-- the one it was made with (and a run id the caller chose is that run's);
-- else the run is submitted and KEYS[12] names it
-- ("id<US>fingerprint") for ARGV[16] ms.
-- A run with a not_before ahead waits in the group's delayed zset (its
-- timer lowered to it; one PUBLISH of storage.TimerEvent): no snapshot
-- sees it, the group is neither bumped nor dirty; due.lua moves it into
-- waiting when due. The run hash gets priority, payload and duration_ms
-- only when not 0, '' and 0 (a missing one reads as that), timeout_ms,
-- max_attempts, backoff
-- (with max_attempts > 1) and not_before only when set.
-- errors: WS_DUP (run id exists, submitted by another call), WS_CONFLICT
-- (the idempotency key names a run made by another request: nothing
-- written), WS_INVALID
-- replay: a retried call (same op id) finds its own run and returns it, replayed = 1.
-- bound: O(log n) (one run, its group's waiting zset)
local pub = {ev = {}, dirty = {}, groups = {}, bump = {}}
local clock
local function now_ms_once()
  clock = clock or now_ms()
  return clock
end
local function submit_one(K, A)
  local slots = tonumber(A[3])
  if not slots or slots < 1 then
    return redis.error_reply('WS_INVALID run ' .. A[2] .. ': slots must be >= 1')
  end
  if K[12] then
    local v = redis.call('GET', K[12])
    if v then
      local prev, fp = string.match(v, '^([^\31]*)\31?(.*)$')
      local r = redis.call('HMGET', A[17] .. prev, 'seq', 'submitted_at', 'group')
      if r[1] then
        if fp ~= A[18] or (A[19] == '1' and prev ~= A[2]) then
          return redis.error_reply('WS_CONFLICT the idempotency key was used for run ' .. prev .. ' (group ' ..
            tostring(r[3]) .. ') with another request; reuse it only for the same request')
        end
        return {tonumber(r[1]), tonumber(r[2]), 1, prev, 1}
      end
    end
  end
  -- a new run's hash does not exist: one HGET says so (an HMGET's reply
  -- table costs the script more), the rest is read only for a run that does
  if redis.call('HGET', K[6], 'id') then
    local r = redis.call('HMGET', K[6], 'op', 'seq', 'submitted_at')
    if r[1] == A[7] then
      return {tonumber(r[2]), tonumber(r[3]), 1, A[2], 1}
    end
    return redis.error_reply('WS_DUP run ' .. A[2] .. ' already exists')
  end
  local seq, now, due, timeout, maxa = new_run(K, A, pub, now_ms_once())
  if K[12] then
    redis.call('SET', K[12], A[2] .. '\31' .. A[18], 'PX', A[16])
  end
  return {seq, now, 0, A[2], due, timeout, maxa}
end
local out = {}
-- the layout first, whole (nothing is written for a call that does not
-- match it), and the call's runs, for the one INCRBY of their seqs
local rk, ra, runs = 7, 5, 0
-- the per-run layouts, '0' to '7', a bit mask: 1 with an idempotency key
-- (3 args, 1 key), 2 with requirements (1 arg), 4 with a trace context
-- (1 arg, last); NA, NK: the args and keys of each
local NA, NK, IDEM, REQ, TP = {}, {}, {}, {}, {}
for b = 0, 7 do
  local l = tostring(b)
  IDEM[l], REQ[l], TP[l] = b % 2 == 1, math.floor(b / 2) % 2 == 1, b >= 4
  NA[l] = 13 + (IDEM[l] and 3 or 0) + (REQ[l] and 1 or 0) + (TP[l] and 1 or 0)
  NK[l] = 5 + (IDEM[l] and 1 or 0)
end
while ra <= #ARGV do
  local na, nk = NA[ARGV[ra]] or 13, NK[ARGV[ra]] or 5
  if ra + na - 1 > #ARGV or rk + nk - 1 > #KEYS then
    return redis.error_reply('WS_INVALID submit: run ' .. runs + 1 .. ': the keys or args do not match')
  end
  runs, rk, ra = runs + 1, rk + nk, ra + na
end
if rk ~= #KEYS + 1 then
  return redis.error_reply('WS_INVALID submit: ' .. (#KEYS + 1 - rk) .. ' keys left over')
end
pub.seqs, rk, ra = runs, 7, 5
-- the runs, under pcall: the version bumps and dirty marks the call
-- collected are written even when a run's command fails (a written run is
-- never left without its group's version bump)
-- K and A: submit_one's layout, one table each for the call (new_run
-- keeps neither): the shared entries here, each run's in the loop
local K = {KEYS[1], KEYS[2], nil, nil, KEYS[3], nil, KEYS[4], KEYS[5], nil, nil, KEYS[6]}
local A = {nil, nil, nil, nil, nil, nil, nil, ARGV[1], ARGV[2], nil, nil, nil, nil, ARGV[3], nil, nil, ARGV[4]}
local done, err = pcall(function()
  while ra <= #ARGV do
    local lay = ARGV[ra]
    local idem = IDEM[lay]
    local na, nk = NA[lay] or 13, NK[lay] or 5
    -- the run's entries of K and A (the shared ones are set once, above)
    K[3], K[4], K[6], K[9], K[10] = KEYS[rk], KEYS[rk + 1], KEYS[rk + 4], KEYS[rk + 2], KEYS[rk + 3]
    for j = 1, 7 do A[j] = ARGV[ra + j] end
    for j = 10, 13 do A[j] = ARGV[ra + j - 2] end
    A[15] = ARGV[ra + 12]
    if idem then
      K[12] = KEYS[rk + 5]
      A[16], A[18], A[19] = ARGV[ra + 13], ARGV[ra + 14], ARGV[ra + 15]
    else
      K[12] = nil
    end
    A[20], A[21] = nil, nil
    if TP[lay] then
      A[21] = ARGV[ra + na - 1]
      if REQ[lay] then A[20] = ARGV[ra + na - 2] end
    elseif REQ[lay] then
      A[20] = ARGV[ra + na - 1]
    end
    out[#out + 1] = submit_one(K, A)
    rk, ra = rk + nk, ra + na
  end
end)
for _, k in ipairs(pub.bump) do redis.call('HINCRBY', k, 'version', pub.bump[k]) end
if #pub.dirty > 0 then redis.call('SADD', KEYS[3], unpack(pub.dirty)) end
if pub.work then redis.call('PUBLISH', ARGV[1], pub.work) end
if pub.timer then redis.call('PUBLISH', ARGV[1], '#timer') end -- storage.TimerEvent
publish_runs(ARGV[2], pub.ev)
if not done then
  return caught(err)
end
return out
