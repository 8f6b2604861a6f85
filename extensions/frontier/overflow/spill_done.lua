--! include _named _overflow
-- A spill batch is in MongoDB: its records are no longer on their way, and the
-- journal that held them goes (once: a batch another node already finished
-- for a dead one is not counted again).
-- Keys (by name, _named.lua): journal (list, NAME:spilling:NODE), spillers
-- (nodes with a journal, zset), frontier (counters: host_queue_max).
-- Arguments: node (the journal's node), queue_prefix, data_prefix (group queue
-- and data key prefixes).
-- Returns  how many records the journal held
local K, A = named_input()
local F = {frontier = K.frontier, queue_prefix = A.queue_prefix, data_prefix = A.data_prefix}
local batch = redis.call('LRANGE', K.journal, 0, -1)
local landed = {}
for _, record in ipairs(batch) do
  local group = string.match(record, '^([^\n]*)\n')
  if group then landed[group] = (landed[group] or 0) + 1 end
end
for group, n in pairs(landed) do
  local key = overflow_key(F, group)
  if redis.call('EXISTS', key) == 1 then
    if redis.call('HINCRBY', key, 'transit', -n) <= 0 then
      redis.call('HDEL', key, 'transit', 'tmin')
    end
    want_refill(F, group)
  end
end
redis.call('DEL', K.journal)
redis.call('ZREM', K.spillers, A.node)
return #batch
