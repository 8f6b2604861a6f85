--! include _named _hooks _crawls
-- Empty the queues of a crawl that was stopped, a bounded part per call.
-- Keys (by name, _named.lua): groups (the crawl's groups, a set), waiting
-- (groups, zset), frontier (counters: queued).
-- Arguments: crawl (its id), queue_prefix, data_prefix (group queue and data
-- key prefixes), batch (requests one call removes at most).
-- Returns, by name: removed (requests removed), more (1 if more are left)
-- Leased requests are left alone: they finish, and their release drops their JSON.
local K, A = named_input()
local F = {data_prefix = A.data_prefix, queue_prefix = A.queue_prefix, ready = '', added = {}}
local crawl, budget = A.crawl, tonumber(A.batch)
local removed, render_removed = 0, 0
while budget > 0 do
  local group = redis.call('SRANDMEMBER', K.groups)
  if not group then break end
  local queue = A.queue_prefix .. group
  local ids = redis.call('ZRANGE', queue, 0, budget - 1)
  if #ids > 0 then
    redis.call('ZREMRANGEBYRANK', queue, 0, #ids - 1)
    for from = 1, #ids, 1000 do
      redis.call('HDEL', A.data_prefix .. group, unpack(ids, from, math.min(from + 999, #ids)))
    end
    removed = removed + #ids
    if lane_of(group) == 'render' then render_removed = render_removed + #ids end
    budget = budget - #ids
  end
  if redis.call('ZCARD', queue) == 0 then
    call_each('emptied', F, group)
    redis.call('SREM', K.groups, group)
    redis.call('ZREM', ready_of(F, crawl, lane_of(group)), group)
    redis.call('ZREM', K.waiting, group)
  end
end
if removed > 0 then
  redis.call('HINCRBY', K.frontier, 'queued', -removed)
  if render_removed > 0 then redis.call('HINCRBY', K.frontier, 'render_queued', -render_removed) end
  count_crawl(F, crawl, 'queued', -removed)
  count_crawl(F, crawl, 'removed', removed)
end
local more = 0
if redis.call('SCARD', K.groups) > 0 then more = 1 end
return {'removed', removed, 'more', more}
