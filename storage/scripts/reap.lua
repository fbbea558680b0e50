-- reap: remove heartbeat-expired workers and their slots (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] workers zset, KEYS[4] slots hash,
-- KEYS[5] free zset, KEYS[6] restore set, KEYS[7..] worker hash of each candidate
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] ms since the caller's term began
-- or Redis last refused it a write at maxmemory (-1 never), ARGV[4..]
-- candidate identities
-- (same order as KEYS[7..])
-- returns: {{reaped identities}, {affected run ids}}
-- A candidate that heartbeated since (expiry > now) or is gone is skipped, and
-- so is one whose heartbeat TTL (worker hash field ttl) is longer than the
-- time since the leader's term began or Redis last refused it a write
-- (spared): its heartbeats were refused or lost too.
-- writes: first fence.reap_at (now): a command Redis refuses at maxmemory,
-- so a reap while Redis refuses writes (it refuses the workers' heartbeats
-- too) fails before it deletes anything (OOM: the caller spares the
-- workers one TTL from then); then deletes the worker's slots (free or
-- not), worker hash, workers entry, its draining mark and placement
-- profile (Keys.Draining, Keys.Placement, from the workers key's prefix); runs that held a slot go into restore.
-- errors: WS_FENCED, WS_INVALID (arity), OOM (Redis at maxmemory: nothing
-- deleted). replay: idempotent (reaped workers are gone).
-- bound: O(c · s): c candidates (the caller passes a bounded list), s slots each
if #KEYS - 6 ~= #ARGV - 3 then
  return redis.error_reply('WS_INVALID reap: worker keys and identities differ')
end
local now, since = now_ms(), tonumber(ARGV[3]) or -1
redis.call('HSET', KEYS[1], 'reap_at', now) -- refused at maxmemory: before any delete
local reaped, affected, seen = {}, {}, {}
for j = 4, #ARGV do
  local w, wk = ARGV[j], KEYS[3 + j]
  local sc = redis.call('ZSCORE', KEYS[3], w)
  if sc and tonumber(sc) <= now and not spared(wk, since) then
    local n = tonumber(redis.call('HGET', wk, 'slots') or '0')
    for i = 0, n - 1 do
      local f = w .. '#' .. i
      local v = redis.call('HGET', KEYS[4], f)
      if v and v ~= '' then
        local run = string.match(v, '^([^#]+)#')
        if run and not seen[run] then
          seen[run] = true
          affected[#affected + 1] = run
          redis.call('SADD', KEYS[6], run)
        end
      end
      redis.call('HDEL', KEYS[4], f)
      redis.call('ZREM', KEYS[5], f)
    end
    redis.call('DEL', wk)
    redis.call('ZREM', KEYS[3], w)
    redis.call('SREM', string.sub(KEYS[3], 1, #KEYS[3] - 7) .. 'draining', w)
    drop_profile(string.sub(KEYS[3], 1, #KEYS[3] - 7) .. 'placement', w)
    reaped[#reaped + 1] = w
  end
end
return {reaped, affected}
