-- Move the highest-priority requests from the queue to this node's leases.
-- KEYS[1]  request queue (zset, score = -priority)
-- KEYS[2]  this node's leases (zset, score = lease deadline in ms)
-- KEYS[3]  node registry (zset, score = last heartbeat in ms)
-- ARGV[1]  how many requests at most
-- ARGV[2]  lease deadline (ms since epoch)
-- ARGV[3]  this node's id
-- ARGV[4]  now (ms since epoch): leasing counts as a heartbeat, so a lease is
--          never held by a node the others cannot see
-- Returns  the leased request JSON strings, best first.
local items = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #items == 0 then
  return items
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #items - 1)
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
for _, item in ipairs(items) do
  redis.call('ZADD', KEYS[2], ARGV[2], item)
end
return items
