-- apply: apply a policy decision to one group (leader, fenced, version CAS).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] group hash, KEYS[4] waiting zset,
-- KEYS[5] active zset, KEYS[6] dirty set, KEYS[7] launched zset,
-- KEYS[8] drain set, KEYS[9] the group's finished zset (retention index),
-- KEYS[10] the group's decisions list, KEYS[11..10+n] run hash of action 1..n
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] group, ARGV[4] snapshot version,
-- ARGV[5] claim id, ARGV[6] policy, ARGV[7] policy version,
-- ARGV[8] discard_below (0 = none), ARGV[9] its reason, ARGV[10] again
-- (1 = the snapshot's window was truncated: keep the group dirty after a
-- non-empty decision, so it is decided again on the next window),
-- ARGV[11] policy sha256, ARGV[12] policy registry version (0 = built-in),
-- ARGV[13] decisions kept per group (the decisions list's length),
-- ARGV[14] run-events channel (publish_runs: each named run's new state),
-- ARGV[15..] per action: kind ("launch"|"discard"|"stop"), run id, reason
-- returns: the group's version after the apply
-- errors (nothing written): WS_FENCED, WS_NOT_FOUND (group; run unknown or of
-- another group), WS_DUP (claim == group.last_claim), WS_STALE (version),
-- WS_INVALID (arity, unknown kind, two actions on one run), WS_BAD_STATE
-- (includes launch or discard of a run covered by the group's discard_below)
-- zero actions and no discard_below = settle: SREM dirty (version matched),
-- no bump. Otherwise: each named run gets the decision record (decision =
-- claim, decision_epoch, decided_at, decision_action, decision_reason,
-- decision_policy, decision_policy_version, policy_sha256, policy_registry;
-- a launch also sets policy and policy_version, the launching version), the group's
-- decisions list gets the decision's summary (newest first, trimmed to
-- ARGV[13]), version+1, last_claim = claim, SREM dirty (unless
-- again). A discard_below above the group's raises it (discard_below,
-- discard_reason) and SADDs the group to drain: the leader discards the
-- covered runs in chunks (drain.lua); they leave every snapshot at once.
-- A decision is complete for its snapshot: the group is not re-marked
-- dirty here (but for again); only a change from outside a decision
-- (submit, report, fail_run, request_stop, set_group) marks it dirty again
-- (README.md "Dirty contract").
-- bound: O(n · log m), n actions (at most the snapshot's runs plus one)
local n = #KEYS - 10
if #ARGV ~= 14 + 3 * n then
  return redis.error_reply('WS_INVALID apply: ' .. n .. ' run keys for ' .. (#ARGV - 14) .. ' action args')
end
local below = tonumber(ARGV[8]) or 0
local g = redis.call('HMGET', KEYS[3], 'version', 'last_claim', 'discard_below')
if not g[1] then
  return redis.error_reply('WS_NOT_FOUND group ' .. ARGV[3] .. ' does not exist')
end
if ARGV[5] ~= '' and g[2] == ARGV[5] then
  return redis.error_reply('WS_DUP claim ' .. ARGV[5] .. ' already applied to group ' .. ARGV[3])
end
if g[1] ~= ARGV[4] then
  return redis.error_reply('WS_STALE group ' .. ARGV[3] .. ' is at version ' .. g[1] .. ', decision made at ' .. ARGV[4])
end
local covered = tonumber(g[3]) or 0
local seen, acts = {}, {}
for j = 1, n do
  local kind, id, reason = ARGV[12 + 3 * j], ARGV[13 + 3 * j], ARGV[14 + 3 * j]
  if seen[id] then
    return redis.error_reply('WS_INVALID two actions on run ' .. id)
  end
  seen[id] = true
  local r = redis.call('HMGET', KEYS[10 + j], 'state', 'group', 'seq')
  if not r[1] or r[2] ~= ARGV[3] then
    return redis.error_reply('WS_NOT_FOUND run ' .. id .. ' is not in group ' .. ARGV[3])
  end
  local st = r[1]
  if kind == 'launch' or kind == 'discard' then
    if st ~= 'WAITING' then
      return redis.error_reply('WS_BAD_STATE ' .. kind .. ' run ' .. id .. ': run is ' .. st .. ', want WAITING')
    end
    if (tonumber(r[3]) or 0) < covered then
      return redis.error_reply('WS_BAD_STATE ' .. kind .. ' run ' .. id .. ': covered by the group\'s discard_below ' .. covered)
    end
  elseif kind == 'stop' then
    if st ~= 'LAUNCHED' and st ~= 'RUNNING' then
      return redis.error_reply('WS_BAD_STATE stop run ' .. id .. ': run is ' .. st .. ', want LAUNCHED or RUNNING')
    end
  else
    return redis.error_reply('WS_INVALID unknown action kind ' .. kind)
  end
  acts[j] = {kind = kind, id = id, reason = reason, st = st, key = KEYS[10 + j]}
end
if n == 0 and below == 0 then
  redis.call('SREM', KEYS[6], ARGV[3])
  return tonumber(g[1])
end
local now = now_ms()
local counts = {launch = 0, discard = 0, stop = 0}
local ev = {}
for _, a in ipairs(acts) do
  counts[a.kind] = counts[a.kind] + 1
  -- the decision record: which decision moved the run, by which policy, why
  -- (policy and policy_version stay the launching decision's: see launch)
  redis.call('HSET', a.key, 'decision', ARGV[5], 'decision_epoch', ARGV[1], 'decided_at', now,
    'decision_action', a.kind, 'decision_reason', a.reason, 'decision_policy', ARGV[6],
    'decision_policy_version', ARGV[7], 'policy_sha256', ARGV[11], 'policy_registry', ARGV[12])
  if a.kind == 'launch' then
    local seq = redis.call('ZSCORE', KEYS[4], a.id)
    redis.call('HSET', a.key, 'state', 'LAUNCHED', 'launched_at', now, 'policy', ARGV[6],
      'policy_version', ARGV[7], 'claim', ARGV[5])
    redis.call('ZREM', KEYS[4], a.id)
    redis.call('ZADD', KEYS[5], seq, a.id)
    redis.call('ZADD', KEYS[7], seq, a.id)
    ev[#ev + 1] = 'LAUNCHED#' .. ARGV[3] .. '#' .. a.id
  elseif a.kind == 'discard' then
    redis.call('HSET', a.key, 'state', 'DISCARDED', 'finished_at', now, 'reason', a.reason)
    redis.call('ZREM', KEYS[4], a.id)
    redis.call('ZADD', KEYS[9], now, a.id)
    ev[#ev + 1] = 'DISCARDED#' .. ARGV[3] .. '#' .. a.id
  elseif a.st == 'LAUNCHED' then
    redis.call('HSET', a.key, 'state', 'STOPPED', 'finished_at', now, 'reason', a.reason)
    redis.call('ZADD', KEYS[9], now, a.id)
    redis.call('ZREM', KEYS[5], a.id)
    redis.call('ZREM', KEYS[7], a.id)
    ev[#ev + 1] = 'STOPPED#' .. ARGV[3] .. '#' .. a.id
  else
    redis.call('HSET', a.key, 'state', 'STOPPING', 'reason', a.reason)
    ev[#ev + 1] = 'STOPPING#' .. ARGV[3] .. '#' .. a.id
  end
end
publish_runs(ARGV[14], ev)
redis.call('LPUSH', KEYS[10], table.concat({now, ARGV[5], ARGV[1], ARGV[6], ARGV[7], ARGV[12],
  counts.launch, counts.discard, counts.stop, below}, '\31'))
redis.call('LTRIM', KEYS[10], 0, math.max(tonumber(ARGV[13]) or 20, 1) - 1)
if below > covered then
  redis.call('HSET', KEYS[3], 'discard_below', string.format('%d', below), 'discard_reason', ARGV[9])
  redis.call('SADD', KEYS[8], ARGV[3])
end
local v = tonumber(g[1]) + 1
redis.call('HSET', KEYS[3], 'version', v, 'last_claim', ARGV[5])
if ARGV[10] ~= '1' then
  redis.call('SREM', KEYS[6], ARGV[3])
end
return v
