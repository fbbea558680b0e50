-- set_allocation: an operator sets the namespace's allocation policy and
-- its parameters (namespace set --allocate; not fenced: like group set, a
-- setting, read by the leader's slot manager on its next pass).
-- KEYS[1] settings hash, KEYS[2] policy-gen counter
-- ARGV[1] policy name ('' = the default, fifo), ARGV[2] parameters
-- (storage.encodeLabels; '' = none), ARGV[3] policy channel
-- returns: the policy generation after the change
-- errors: none (Go validated the arguments)
-- writes: settings allocate / alloc_params (HDEL when ''), INCR policy-gen
-- and PUBLISH "name 0 gen" on ARGV[3] (every host refreshes its policy set
-- and pre-loads the policy, as after an activation).
-- replay: idempotent but for the generation.
-- bound: O(1)
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'allocate')
else
  redis.call('HSET', KEYS[1], 'allocate', ARGV[1])
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], 'alloc_params')
else
  redis.call('HSET', KEYS[1], 'alloc_params', ARGV[2])
end
local gen = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], (ARGV[1] == '' and 'fifo' or ARGV[1]) .. ' 0 ' .. gen)
return gen
