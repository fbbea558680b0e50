-- fencing prelude (prepended by Go to every leader-authority script)
-- KEYS[1] fence hash, KEYS[2] leader lock key; ARGV[1] epoch, ARGV[2] holder.
-- Returns WS_FENCED, before anything is written, unless fence.epoch == epoch,
-- fence.holder == holder and GET(lock) == holder.
do
  local f = redis.call('HMGET', KEYS[1], 'epoch', 'holder')
  local l = redis.call('GET', KEYS[2])
  if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or l ~= ARGV[2] then
    return redis.error_reply('WS_FENCED epoch ' .. ARGV[1] .. ' holder ' .. ARGV[2] ..
      ' is not the leader (fence epoch ' .. tostring(f[1]) .. ')')
  end
end
