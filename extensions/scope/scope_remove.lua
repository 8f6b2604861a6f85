--! include _named _hooks _crawls
-- Remove queued requests a crawl's new scope refuses (scrapy scope): each of
-- the given ids still in the group's queue goes, with its JSON; one leased
-- since was read is judged again when its node hands it to the engine.
-- Keys (by name, _named.lua): frontier (counters: queued, render_queued).
-- Arguments: queue_prefix, data_prefix (group queue and data key prefixes); group.
-- Items: the ids.
-- Returns the ids removed.
local K, A, L = named_input()
local F = {data_prefix = A.data_prefix, queue_prefix = A.queue_prefix, frontier = K.frontier,
           ready = '', added = {}}
local group = A.group
local queue = A.queue_prefix .. group
local gone = {}
for _, id in ipairs(L) do
  if redis.call('ZREM', queue, id) == 1 then
    redis.call('HDEL', A.data_prefix .. group, id)
    gone[#gone + 1] = id
  end
end
local removed = #gone
if removed > 0 then
  local crawl = crawl_of(group)
  redis.call('HINCRBY', K.frontier, 'queued', -removed)
  if lane_of(group) == 'render' then redis.call('HINCRBY', K.frontier, 'render_queued', -removed) end
  count_crawl(F, crawl, 'queued', -removed)
  count_crawl(F, crawl, 'removed', removed)
  -- a queue that shrank may take back what it has in MongoDB (the overflow's piece);
  -- one that emptied leaves its ready set at its next lease
  call_each('taken', F, group)
end
return gone
