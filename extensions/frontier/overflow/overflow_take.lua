--! include _named _overflow
-- A node's turn at moving requests between Redis and MongoDB (FRONTIER_OVERFLOW):
-- a batch of spill records into its journal, and the groups due for a refill.
-- Keys (by name, _named.lua):
--   spill     spill records (list, NAME:spill)
--   journal   this node's journal (list, NAME:spilling:NODE): the batch it writes
--             to MongoDB; what an earlier turn left there (a write that failed)
--             is written again first
--   spillers  nodes with a journal (zset, node -> when it took its batch, ms)
--   refill    groups due for a refill (zset, group -> when it may be claimed, ms)
--   frontier  frontier counters (hash: host_queue_max)
-- Arguments: node (this node's id), now (ms since epoch), batch (records one
-- batch takes at most), claim_ms (ms a refill claim lasts: a node dying with it
-- leaves the group due again), groups (groups one turn claims at most),
-- queue_prefix (group queue key prefix).
-- Returns, by name: batch, claimed ({group, requests its queue has room for,
-- tmin or '', the claim (refill.lua checks it is still the group's)}...
-- flattened), waiting (records still waiting in spill)
local K, A = named_input(true)
local F = {frontier = K.frontier, base = string.sub(K.refill, 1, #K.refill - #'refill')}
local now = tonumber(A.now)
local batch = redis.call('LRANGE', K.journal, 0, -1)
if #batch == 0 then
  batch = redis.call('LRANGE', K.spill, 0, tonumber(A.batch) - 1)
  if #batch > 0 then
    redis.call('LTRIM', K.spill, #batch, -1)
    for from = 1, #batch, 500 do
      redis.call('RPUSH', K.journal, unpack(batch, from, math.min(from + 499, #batch)))
    end
  end
end
if #batch > 0 then
  redis.call('ZADD', K.spillers, now, A.node)
end
local claimed = {}
local limit = queue_max(F)
for _, group in ipairs(redis.call('ZRANGEBYSCORE', K.refill, '-inf', now, 'LIMIT', 0,
                                  tonumber(A.groups))) do
  local claim = now + tonumber(A.claim_ms)
  redis.call('ZADD', K.refill, claim, group)
  local room = limit - redis.call('ZCARD', A.queue_prefix .. group)
  claimed[#claimed + 1] = group
  claimed[#claimed + 1] = math.max(room, 0)
  claimed[#claimed + 1] = redis.call('HGET', overflow_key(F, group), 'tmin') or ''
  claimed[#claimed + 1] = redis.call('ZSCORE', K.refill, group)
end
return {'batch', batch, 'claimed', claimed, 'waiting', redis.call('LLEN', K.spill)}
