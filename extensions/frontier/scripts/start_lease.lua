-- Lease start-URL entries: take up to ARGV[1] of the entries due first from the
-- start key into this node's start leases, where they stay until the requests
-- built from them are queued (or they are dead-lettered).
-- KEYS[1]  start key: a list (users LPUSH; the oldest entry is at the right
--          end), a set (any member) or a sorted set (highest score first)
-- KEYS[2]  this node's start leases (list)
-- KEYS[3]  node registry (zset, score = last heartbeat in ms)
-- ARGV[1]  how many entries at most
-- ARGV[2]  this node's id
-- ARGV[3]  now (ms since epoch): taking counts as a heartbeat, so the others
--          can always see whose start leases these are
-- ARGV[4]  the start key's type: list, set or zset
-- Returns  the entries, in the order they are due.
local items
if ARGV[4] == 'set' then
  items = redis.call('SPOP', KEYS[1], ARGV[1])
elseif ARGV[4] == 'zset' then
  local popped = redis.call('ZPOPMAX', KEYS[1], ARGV[1])
  items = {}
  for i = 1, #popped, 2 do
    items[#items + 1] = popped[i]
  end
else
  items = redis.call('RPOP', KEYS[1], ARGV[1])
end
if not items or #items == 0 then
  return {}
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
redis.call('RPUSH', KEYS[2], unpack(items))
return items
