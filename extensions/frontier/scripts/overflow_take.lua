--! include _queues
-- A node's turn at moving requests between Redis and MongoDB (FRONTIER_OVERFLOW):
-- a batch of spill records into its journal, and the groups due for a refill.
-- KEYS[1]  spill records (list, NAME:spill)
-- KEYS[2]  this node's journal (list, NAME:spilling:NODE): the batch it writes
--          to MongoDB; what an earlier turn left there (a write that failed) is
--          written again first
-- KEYS[3]  nodes with a journal (zset, node -> when it took its batch, ms)
-- KEYS[4]  groups due for a refill (zset, group -> when it may be claimed, ms)
-- KEYS[5]  frontier counters (hash: host_queue_max)
-- ARGV[1]  this node's id      ARGV[2]  now (ms since epoch)
-- ARGV[3]  records one batch takes at most
-- ARGV[4]  ms a refill claim lasts (a node dying with it leaves the group due again)
-- ARGV[5]  groups one turn claims at most       ARGV[6]  group queue key prefix
-- Returns  {the batch, {group, requests its queue has room for, tmin or '', the
--          claim (refill.lua checks it is still the group's)}... flattened,
--          records still waiting in KEYS[1]}
local F = {frontier = KEYS[5], base = string.sub(KEYS[4], 1, #KEYS[4] - #'refill')}
local now = tonumber(ARGV[2])
local batch = redis.call('LRANGE', KEYS[2], 0, -1)
if #batch == 0 then
  batch = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
  if #batch > 0 then
    redis.call('LTRIM', KEYS[1], #batch, -1)
    for from = 1, #batch, 500 do
      redis.call('RPUSH', KEYS[2], unpack(batch, from, math.min(from + 499, #batch)))
    end
  end
end
if #batch > 0 then
  redis.call('ZADD', KEYS[3], now, ARGV[1])
end
local claimed = {}
local limit = queue_max(F)
for _, group in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0,
                                  tonumber(ARGV[5]))) do
  local claim = now + tonumber(ARGV[4])
  redis.call('ZADD', KEYS[4], claim, group)
  local room = limit - redis.call('ZCARD', ARGV[6] .. group)
  claimed[#claimed + 1] = group
  claimed[#claimed + 1] = math.max(room, 0)
  claimed[#claimed + 1] = redis.call('HGET', overflow_key(F, group), 'tmin') or ''
  claimed[#claimed + 1] = redis.call('ZSCORE', KEYS[4], group)
end
return {batch, claimed, redis.call('LLEN', KEYS[1])}
