-- Reserve the next send time for a host under a cluster-wide rate limit (GCRA:
-- one stored time per host, every reservation pushes it one interval on).
-- KEYS[1]  the host's next free send time (string, ms since epoch)
-- ARGV[1]  now (ms since epoch)
-- ARGV[2]  interval between two requests to this host (ms)
-- Returns  the reserved send time (ms since epoch): now, or later when busy.
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local slot = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
redis.call('SET', KEYS[1], slot + interval, 'PX', slot + interval - now + 60000)
return slot
