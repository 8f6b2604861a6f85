--! include _named _crawls _queues _overflow
-- Requests of one group back from MongoDB into its queue, best first. Each is
-- marked in refilled as it comes back (GROUP\nID\nLIFE -> node) until its
-- document is marked taken: one a node that died before that put back already,
-- or one in the queue or leased, is not queued twice. Only the node whose claim
-- on the group still stands (claim, the claim's time) may refill it: one
-- whose turn outlasted its claim finds another claim, and does nothing. A crawl
-- that was stopped has them dropped instead (counted in its 'removed'), and so
-- is an entry with no order: a document that is not a request.
-- Keys (by name, _named.lua): ready, waiting (groups, zsets); frontier
-- (counters: queued, spilled, host_queue_max); refilled (requests back from
-- MongoDB and not yet marked there, a hash); refill (groups due for a refill,
-- a zset).
-- Arguments: queue_prefix, data_prefix (group queue and data key prefixes);
-- node (this node's id); group; now (ms); retry_ms (ms before a group still
-- short of work may be refilled again: the rest of what it has out of Redis is
-- on its way to MongoDB); claim (the group's score in refill when this node
-- claimed it).
-- Items: id, life, order, request JSON; repeated, best first.
-- Returns  id, life, ... of the documents that may be marked taken (false: the
--          claim was lost)
local K, A, L = named_input(true)
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready, waiting = K.waiting,
           frontier = K.frontier, added = {}, refilling = true}
local group = A.group
if redis.call('ZSCORE', K.refill, group) ~= A.claim then return false end
local key = overflow_key(F, group)
local crawl = crawl_of(group)
local ended = has_ended(F, crawl)
local settled, taken, dropped = {}, 0, 0
local last = nil
for i = 1, #L - 3, 4 do
  local id, order = L[i], tonumber(L[i + 2])
  settled[#settled + 1] = id
  settled[#settled + 1] = L[i + 1]
  local mark = group .. '\n' .. id .. '\n' .. L[i + 1]
  if redis.call('HEXISTS', K.refilled, mark) == 0
      and redis.call('HEXISTS', F.data_prefix .. group, id) == 0 then
    redis.call('HSET', K.refilled, mark, A.node)
    if ended or not order then  -- not order: not a request (the node dead-letters it)
      dropped = dropped + 1
    else
      push(F, group, order, id, L[i + 3])
    end
    taken = taken + 1
    last = order or last
  end
end
local left = 0
if taken > 0 then
  redis.call('HINCRBY', K.frontier, 'spilled', -taken)
  left = redis.call('HINCRBY', key, 'n', -taken)
  if dropped > 0 then
    redis.call('HINCRBY', K.frontier, 'queued', -dropped)
    if lane_of(group) == 'render' then
      redis.call('HINCRBY', K.frontier, 'render_queued', -dropped)
    end
    count_crawl(F, crawl, 'queued', -dropped)
    if ended then count_crawl(F, crawl, 'removed', dropped) end
  end
else
  left = tonumber(redis.call('HGET', key, 'n') or '0') or 0
end
if left <= 0 then
  redis.call('DEL', key)
  redis.call('ZREM', K.refill, group)
else
  -- nothing out of Redis is better than the last one back
  if last then redis.call('HSET', key, 'floor', string.format('%.0f', last)) end
  if ended or redis.call('ZCARD', F.queue_prefix .. group) * 2 <= queue_max(F) then
    redis.call('ZADD', K.refill, tonumber(A.now) + tonumber(A.retry_ms), group)
  else
    redis.call('ZREM', K.refill, group)
  end
end
settle(F)
return settled
