--! include _hooks _entries _crawls
-- Adding a request to its group's queue (push, settle); a piece may take it
-- elsewhere (the hook slots: _hooks.lua).

local function count_queued(F, group, crawl)
  F.count = (F.count or 0) + 1
  if lane_of(group) == 'render' then F.render_count = (F.render_count or 0) + 1 end
  if crawl ~= '' then
    F.crawl_count = F.crawl_count or {}
    F.crawl_count[crawl] = (F.crawl_count[crawl] or 0) + 1
  end
end

-- Add a request to its group's queue: its id, with its JSON when the id is new
-- (item = nil puts back an id whose JSON is stored). A request of a crawl that
-- was stopped is dropped instead (its JSON too), counted in the crawl's 'removed'.
-- A new request may go elsewhere (the 'diverted' slot: the overflow). F.refilling:
-- requests coming back, counted already. F: {queue_prefix, data_prefix, ready,
-- waiting, frontier, added = {}}; call settle(F) once at the end of the script.
local function push(F, group, score, id, item)
  local crawl = crawl_of(group)
  if has_ended(F, crawl) then
    if id and not item then redis.call('HDEL', F.data_prefix .. group, id) end
    count_crawl(F, crawl, 'removed', 1)
    return
  end
  local fresh = id and not F.refilling
  if fresh and diverted(F, group, score, id, item) then return end
  local member = id or item
  if id and item then
    redis.call('HSET', F.data_prefix .. group, id, item)
  end
  local queue = F.queue_prefix .. group
  if redis.call('ZADD', queue, order_arg(score), member) == 1 then
    local best = F.added[group]
    F.added[group] = (best and math.min(best, score)) or score
    if not F.refilling then count_queued(F, group, crawl) end
    if fresh then call_each('queued', F, group, queue) end
  end
end

-- The queued counts (render_queued: those in render groups), and each group
-- that got work among its crawl's ready ones (unless politeness holds it back):
-- once per script and group, not per request.
local SETTLE_CHUNK = 1000  -- groups a command names at most (Lua's unpack is bounded)
local function settle(F)
  if F.count then
    redis.call('HINCRBY', F.frontier, 'queued', F.count)
  end
  if F.render_count then redis.call('HINCRBY', F.frontier, 'render_queued', F.render_count) end
  for crawl, n in pairs(F.crawl_count or {}) do
    count_crawl(F, crawl, 'queued', n)
  end
  -- a command per key, not per group: one ZMSCORE says which are waiting, one
  -- ZADD a ready set takes the rest, one SADD a crawl's groups (a flush names
  -- dozens of hosts; Redis's cost is mostly per command, not per member)
  local groups, scores = {}, {}
  for group, score in pairs(F.added) do
    groups[#groups + 1] = group
    scores[#scores + 1] = score
  end
  local readies, ready_members, crawl_groups = {}, {}, {}
  for from = 1, #groups, SETTLE_CHUNK do
    local last = math.min(from + SETTLE_CHUNK - 1, #groups)
    local waiting = redis.call('ZMSCORE', F.waiting, unpack(groups, from, last))
    for at = from, last do
      local group = groups[at]
      local crawl = crawl_of(group)
      if crawl ~= '' then
        crawl_groups[crawl] = crawl_groups[crawl] or {}
        table.insert(crawl_groups[crawl], group)
      end
      if not waiting[at - from + 1] then
        local lane = lane_of(group)
        local ready = ready_of(F, crawl, lane)
        local members = ready_members[ready]
        if not members then
          members = {}
          ready_members[ready] = members
          readies[#readies + 1] = {ready, crawl, lane}
        end
        members[#members + 1] = order_arg(ready_score(F, group, scores[at]))
        members[#members + 1] = group
      end
    end
  end
  for crawl, in_crawl in pairs(crawl_groups) do
    for from = 1, #in_crawl, SETTLE_CHUNK do
      redis.call('SADD', crawl_key(F, crawl, 'groups'),
                 unpack(in_crawl, from, math.min(from + SETTLE_CHUNK - 1, #in_crawl)))
    end
  end
  for _, ready in ipairs(readies) do
    local members = ready_members[ready[1]]
    for from = 1, #members, 2 * SETTLE_CHUNK do
      redis.call('ZADD', ready[1], 'LT',
                 unpack(members, from, math.min(from + 2 * SETTLE_CHUNK - 1, #members)))
    end
    take_turn(F, ready[2], ready[3])
  end
  call_each('settled', F)
  F.added, F.count, F.crawl_count, F.render_count = {}, nil, nil, nil
end
