-- expired_workers: workers whose heartbeat expiry has passed (read-only).
-- KEYS[1] workers zset, KEYS[2] slots hash, KEYS[3] free zset
-- ARGV[1] limit
-- returns: {{identity, ...}, assigned slots (all slots minus free ones)}
-- bound: O(log n + limit)
return {redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now_ms()), 'LIMIT', 0, tonumber(ARGV[1])),
  redis.call('HLEN', KEYS[2]) - redis.call('ZCARD', KEYS[3])}
