--! include _crawls _queues
-- Requests of one group back from MongoDB into its queue, best first. Each is
-- marked in KEYS[4] as it comes back (GROUP\nID\nLIFE -> node) until its
-- document is marked taken: one a node that died before that put back already,
-- or one in the queue or leased, is not queued twice. Only the node whose claim
-- on the group still stands (ARGV[7], the claim's time) may refill it: one
-- whose turn outlasted its claim finds another claim, and does nothing. A crawl
-- that was stopped has them dropped instead (counted in its 'removed'), and so
-- is an entry with no order: a document that is not a request.
-- KEYS[1]  ready groups (zset)      KEYS[2]  waiting groups (zset)
-- KEYS[3]  frontier counters (hash: queued, spilled, host_queue_max)
-- KEYS[4]  requests back from MongoDB and not yet marked there (hash)
-- KEYS[5]  groups due for a refill (zset)
-- ARGV[1]  group queue key prefix   ARGV[2]  group data key prefix
-- ARGV[3]  this node's id           ARGV[4]  the group
-- ARGV[5]  now (ms)                 ARGV[6]  ms before a group still short of
--          work may be refilled again (the rest of what it has out of Redis is
--          on its way to MongoDB)
-- ARGV[7]  the claim: the group's score in KEYS[5] when this node claimed it
-- ARGV[8..] id, life, order, request JSON; repeated, best first
-- Returns  id, life, ... of the documents that may be marked taken (false: the
--          claim was lost)
local F = {queue_prefix = ARGV[1], data_prefix = ARGV[2], ready = KEYS[1], waiting = KEYS[2],
           frontier = KEYS[3], added = {}, refilling = true}
local group = ARGV[4]
if redis.call('ZSCORE', KEYS[5], group) ~= ARGV[7] then return false end
local key = overflow_key(F, group)
local crawl = crawl_of(group)
local ended = has_ended(F, crawl)
local settled, taken, dropped = {}, 0, 0
local last = nil
for i = 8, #ARGV, 4 do
  local id, order = ARGV[i], tonumber(ARGV[i + 2])
  settled[#settled + 1] = id
  settled[#settled + 1] = ARGV[i + 1]
  local mark = group .. '\n' .. id .. '\n' .. ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[4], mark) == 0
      and redis.call('HEXISTS', F.data_prefix .. group, id) == 0 then
    redis.call('HSET', KEYS[4], mark, ARGV[3])
    if ended or not order then  -- not order: not a request (the node dead-letters it)
      dropped = dropped + 1
    else
      push(F, group, order, id, ARGV[i + 3])
    end
    taken = taken + 1
    last = order or last
  end
end
local left = 0
if taken > 0 then
  redis.call('HINCRBY', KEYS[3], 'spilled', -taken)
  left = redis.call('HINCRBY', key, 'n', -taken)
  if dropped > 0 then
    redis.call('HINCRBY', KEYS[3], 'queued', -dropped)
    if lane_of(group) == 'render' then
      redis.call('HINCRBY', KEYS[3], 'render_queued', -dropped)
    end
    count_crawl(F, crawl, 'queued', -dropped)
    if ended then count_crawl(F, crawl, 'removed', dropped) end
  end
else
  left = tonumber(redis.call('HGET', key, 'n') or '0') or 0
end
if left <= 0 then
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[5], group)
else
  -- nothing out of Redis is better than the last one back
  if last then redis.call('HSET', key, 'floor', string.format('%.0f', last)) end
  if ended or redis.call('ZCARD', F.queue_prefix .. group) * 2 <= queue_max(F) then
    redis.call('ZADD', KEYS[5], tonumber(ARGV[5]) + tonumber(ARGV[6]), group)
  else
    redis.call('ZREM', KEYS[5], group)
  end
end
settle(F)
return settled
