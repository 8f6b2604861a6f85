-- Lease start-URL entries: take up to ARGV[1] of the oldest entries from the
-- start list into this node's start leases, where they stay until the requests
-- built from them are queued (or they are dead-lettered).
-- KEYS[1]  start URL list (users LPUSH; the oldest entry is at the right end)
-- KEYS[2]  this node's start leases (list)
-- KEYS[3]  node registry (zset, score = last heartbeat in ms)
-- ARGV[1]  how many entries at most
-- ARGV[2]  this node's id
-- ARGV[3]  now (ms since epoch): taking counts as a heartbeat, so the others
--          can always see whose start leases these are
-- Returns  the entries, oldest first.
local items = redis.call('RPOP', KEYS[1], ARGV[1])
if not items then
  return {}
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
redis.call('RPUSH', KEYS[2], unpack(items))
return items
