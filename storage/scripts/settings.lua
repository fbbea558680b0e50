-- settings: the leader records a namespace setting its hosts were started
-- with (leader, fenced): today max_run_slots (serve --max-run-slots).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] settings hash
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] field, ARGV[4] value ('' = remove)
-- returns: 1
-- errors (nothing written): WS_FENCED
-- writes: HSET or HDEL of the field.
-- replay: idempotent.
-- bound: O(1)
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[3], ARGV[3])
else
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
return 1
