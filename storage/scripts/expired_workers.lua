-- expired_workers: workers whose heartbeat expiry has passed (read-only).
-- KEYS[1] workers zset
-- ARGV[1] limit
-- returns: {identity, ...}
-- bound: O(log n + limit)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now_ms()), 'LIMIT', 0, tonumber(ARGV[1]))
