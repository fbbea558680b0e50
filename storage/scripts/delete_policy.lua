-- delete_policy: delete one inactive version of a policy, or a policy with no
-- active version (operator write, unfenced).
-- KEYS[1] policies set, KEYS[2] policy hash, KEYS[3] versions list,
-- KEYS[4] history list, KEYS[5] activations list, KEYS[6] policygen counter,
-- KEYS[7..6+nb] blob keys: of the version (version delete), or of each
-- version in order (whole delete), then KEYS[7+nb..] the versions lists of
-- every other policy (for the blob check)
-- ARGV[1] name, ARGV[2] version ("" = the whole policy), ARGV[3] who,
-- ARGV[4] note, ARGV[5] nb
-- A deleted version keeps its number: its entry is emptied (sha "", note
-- "deleted"), it leaves the activations stack and cannot be activated. A
-- blob is deleted only when no version of any policy still names it.
-- returns: the number of blobs deleted
-- errors (nothing written): WS_NOT_FOUND (policy, version), WS_BAD_STATE
-- (the version is active; the policy has an active version; a policy was
-- created meanwhile: the caller retries)
-- bound: O(versions of all policies) (the registry is small)
-- replay: a retried call finds the version already deleted (WS_NOT_FOUND).
local US = string.char(31)
local p = redis.call('HMGET', KEYS[2], 'kind', 'active')
if not p[1] then
  return redis.error_reply('WS_NOT_FOUND policy ' .. ARGV[1] .. ' does not exist')
end
local nb = tonumber(ARGV[5])
local others = 7 + nb
if redis.call('SCARD', KEYS[1]) ~= #KEYS - others + 2 then
  return redis.error_reply('WS_BAD_STATE the policy registry changed meanwhile; try again')
end
local active = tonumber(p[2]) or 0
local function sha_of(entry) return string.match(entry, '^([^' .. US .. ']*)') end
-- referenced: does a version of another policy (or, for a version delete,
-- another version of this one) name sha?
local function referenced(sha, self_skip)
  for j = others, #KEYS do
    for _, e in ipairs(redis.call('LRANGE', KEYS[j], 0, -1)) do
      if sha_of(e) == sha then return true end
    end
  end
  if self_skip then
    for i, e in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
      if i ~= self_skip and sha_of(e) == sha then return true end
    end
  end
  return false
end
local now = string.format('%d', now_ms())
local deleted = 0
if ARGV[2] ~= '' then
  local v = tonumber(ARGV[2])
  local e = v and redis.call('LINDEX', KEYS[3], v - 1)
  if not e or sha_of(e) == '' then
    return redis.error_reply('WS_NOT_FOUND policy ' .. ARGV[1] .. ' has no version ' .. ARGV[2])
  end
  if v == active then
    return redis.error_reply('WS_BAD_STATE version ' .. v .. ' of policy ' .. ARGV[1] ..
      ' is active: activate another version (or roll back) first')
  end
  local sha = sha_of(e)
  local rest = string.sub(e, #sha + 2)
  local at, who = string.match(rest, '^([^' .. US .. ']*)' .. US .. '([^' .. US .. ']*)')
  redis.call('LSET', KEYS[3], v - 1, US .. (at or '') .. US .. (who or '') .. US .. 'deleted')
  redis.call('LREM', KEYS[5], 0, v)
  redis.call('RPUSH', KEYS[4], now .. US .. ARGV[3] .. US .. 'delete' .. US .. v .. US .. ARGV[4])
  if not referenced(sha, v) then
    deleted = redis.call('DEL', KEYS[7])
  end
  return deleted
end
if active ~= 0 then
  return redis.error_reply('WS_BAD_STATE policy ' .. ARGV[1] .. ' has active version ' .. active ..
    ': delete only its other versions (--version V), or make none active first')
end
local entries = redis.call('LRANGE', KEYS[3], 0, -1)
for i, e in ipairs(entries) do
  local sha = sha_of(e)
  if sha ~= '' and i <= nb and not referenced(sha, i) then
    deleted = deleted + redis.call('DEL', KEYS[6 + i])
  end
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[6])
return deleted
