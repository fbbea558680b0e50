-- The keys apply.lua works on (storage/testdata/luacost/run.sh): 32 groups,
-- each a group hash, a decision list of 5, 10 waiting runs, their index
-- entries and run hashes;
-- a 512-slot table. ARGV[1] = 'folded': the waiting members carry their
-- index entry ("id|entry", for apply_folded.lua).
-- (one call writes them all: N groups, then the slots)
local N = 32
local out = 0
for g = 1, N do
  local kg = 'ns:group:g' .. g
  redis.call('HSET', kg, 'name', 'g'..g, 'policy', 'wait', 'max_active', '1', 'version', '10', 'gen', '5', 'last_claim', 'c-x', 'dv', '9', 'window', '32')
  -- the group's decision list as a bench leaves it after its first decisions
  for d = 1, 5 do
    redis.call('LPUSH', kg .. ':decisions', '1796345385519\31c-g-' .. d .. '\31' .. '5\31wait\31' .. '1\31' .. '0\31' .. '1\31' .. '0\31' .. '0\31' .. '0')
  end
  for r = 1, 10 do
    local id = 'r' .. g .. '-' .. r
    redis.call('ZADD', kg .. ':waiting', r, ARGV[1] == 'folded' and id .. '|' .. r .. ',0,1,1796345385519,1,1,0,' or id)
    redis.call('HSET', kg .. ':winfo', id, r .. ',0,1,1796345385519,1,1,0,')
    redis.call('HSET', 'ns:run:' .. id, 'id', id, 'group', 'g'..g, 'seq', r, 'state', 'WAITING', 'slots', '1', 'priority', '0', 'payload', 'p', 'duration_ms', '0', 'submitted_at', '1796345385519', 'op', 'abcdef0123456789')
  end
end
for i = 1, 512 do redis.call('HSET', 'ns:slots', 'bench-worker-0#1796345385519195323#9e63a5802087dfe1#' .. i, '') end
return 1
