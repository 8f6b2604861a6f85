--! include _crawls _queues
-- Empty the queues of a crawl that was stopped, a bounded part per call.
-- KEYS[1]  the crawl's groups (set)      KEYS[2]  waiting groups (zset)
-- KEYS[3]  frontier counters (hash: queued)
-- ARGV[1]  the crawl id    ARGV[2]  group queue key prefix
-- ARGV[3]  group data key prefix         ARGV[4]  requests one call removes at most
-- Returns  {requests removed, 1 if more are left}
-- Leased requests are left alone: they finish, and their release drops their JSON.
local F = {data_prefix = ARGV[3], queue_prefix = ARGV[2], ready = '', added = {}}
local crawl, budget = ARGV[1], tonumber(ARGV[4])
local removed, render_removed = 0, 0
while budget > 0 do
  local group = redis.call('SRANDMEMBER', KEYS[1])
  if not group then break end
  local queue = ARGV[2] .. group
  local ids = redis.call('ZRANGE', queue, 0, budget - 1)
  if #ids > 0 then
    redis.call('ZREMRANGEBYRANK', queue, 0, #ids - 1)
    for from = 1, #ids, 1000 do
      redis.call('HDEL', ARGV[3] .. group, unpack(ids, from, math.min(from + 999, #ids)))
    end
    removed = removed + #ids
    if lane_of(group) == 'render' then render_removed = render_removed + #ids end
    budget = budget - #ids
  end
  if redis.call('ZCARD', queue) == 0 then
    -- what it has in MongoDB comes back to be dropped the same way (refill.lua)
    if redis.call('EXISTS', overflow_key(F, group)) == 1 then
      redis.call('ZADD', crawl_base(F) .. 'refill', 0, group)
    end
    redis.call('SREM', KEYS[1], group)
    redis.call('ZREM', ready_of(F, crawl, lane_of(group)), group)
    redis.call('ZREM', KEYS[2], group)
  end
end
if removed > 0 then
  redis.call('HINCRBY', KEYS[3], 'queued', -removed)
  if render_removed > 0 then redis.call('HINCRBY', KEYS[3], 'render_queued', -render_removed) end
  count_crawl(F, crawl, 'queued', -removed)
  count_crawl(F, crawl, 'removed', removed)
end
local more = 0
if redis.call('SCARD', KEYS[1]) > 0 then more = 1 end
return {removed, more}
