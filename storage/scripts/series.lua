-- series: append one point to the namespace's time series and to each
-- named group's (leader, fenced).
-- KEYS[1] fence, KEYS[2] lock, KEYS[3] the namespace's series list
-- (Keys.Series), KEYS[4..] the series list of each group (Keys.GroupSeries)
-- ARGV[1] epoch, ARGV[2] holder, ARGV[3] points kept per list
-- (storage.SeriesPoints), ARGV[4] a group series' lifetime ms (renewed by
-- every point), ARGV[5] the namespace's point, ARGV[6..] each group's point
-- (one per KEYS[4..]); a point is "at_ms,field,..." (storage.SeriesPoint)
-- returns: the number of lists written
-- errors: WS_FENCED (prelude), WS_INVALID (arity)
-- writes: RPUSH of each point, LTRIM to the newest ARGV[3]; a group's list
-- expires ARGV[4] after its last point (a group gone quiet leaves nothing).
-- bound: O(groups) (the caller passes at most storage.SeriesGroups)
if #ARGV ~= #KEYS + 2 then
  return redis.error_reply('WS_INVALID series: ' .. (#KEYS - 3) .. ' group keys for ' .. (#ARGV - 5) .. ' group points')
end
local keep = tonumber(ARGV[3]) or 8640
for i = 3, #KEYS do
  redis.call('RPUSH', KEYS[i], ARGV[i + 2])
  redis.call('LTRIM', KEYS[i], -keep, -1)
  if i > 3 then redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
end
return #KEYS - 2
