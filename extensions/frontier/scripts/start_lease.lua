--! include _named
-- Lease start-URL entries: take up to count of the entries due first from the
-- start key into this node's start leases, where they stay until the requests
-- built from them are queued (or they are dead-lettered).
-- Keys (by name, _named.lua): start_urls (the start key: a list, users LPUSH
-- and the oldest entry is at the right end; a set, any member; or a sorted set,
-- highest score first), start_leases (this node's, a list), nodes (registry,
-- zset, score = last heartbeat in ms).
-- Arguments: count (how many entries at most), node (this node's id), now (ms
-- since epoch: taking counts as a heartbeat, so the others can always see
-- whose start leases these are), start_type (list, set or zset).
-- Returns  the entries, in the order they are due.
local K, A = named_input(true)
local items
if A.start_type == 'set' then
  items = redis.call('SPOP', K.start_urls, A.count)
elseif A.start_type == 'zset' then
  local popped = redis.call('ZPOPMAX', K.start_urls, A.count)
  items = {}
  for i = 1, #popped, 2 do
    items[#items + 1] = popped[i]
  end
else
  items = redis.call('RPOP', K.start_urls, A.count)
end
if not items or #items == 0 then
  return {}
end
redis.call('ZADD', K.nodes, A.now, A.node)
redis.call('RPUSH', K.start_leases, unpack(items))
return items
