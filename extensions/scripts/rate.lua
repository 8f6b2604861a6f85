-- Reserve the next send time for hosts under a cluster-wide rate limit (GCRA:
-- one stored time per host, every reservation pushes it one interval on).
-- KEYS[i]    host i's next free send time (string, ms since epoch); a host may
--            appear more than once and then gets consecutive send times
-- ARGV[1]    now (ms since epoch)
-- ARGV[i+1]  interval between two requests to host i (ms)
-- Returns    the reserved send times (ms since epoch), one per key, in order:
--            now, or later when the host is busy.
local now = tonumber(ARGV[1])
local slots = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[i + 1])
  local slot = math.max(tonumber(redis.call('GET', key) or '0'), now)
  redis.call('SET', key, slot + interval, 'PX', slot + interval - now + 60000)
  slots[i] = slot
end
return slots
