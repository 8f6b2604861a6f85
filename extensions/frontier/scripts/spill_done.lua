--! include _queues
-- A spill batch is in MongoDB: its records are no longer on their way, and the
-- journal that held them goes (once: a batch another node already finished
-- for a dead one is not counted again).
-- KEYS[1]  the journal (list, NAME:spilling:NODE)
-- KEYS[2]  nodes with a journal (zset)
-- KEYS[3]  frontier counters (hash: host_queue_max)
-- ARGV[1]  the journal's node    ARGV[2]  group queue key prefix
-- ARGV[3]  group data key prefix
-- Returns  how many records the journal held
local F = {frontier = KEYS[3], queue_prefix = ARGV[2], data_prefix = ARGV[3]}
local batch = redis.call('LRANGE', KEYS[1], 0, -1)
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
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return #batch
