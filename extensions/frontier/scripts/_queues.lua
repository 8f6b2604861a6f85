--! include _entries _crawls _ranks
-- Adding a request to its group's queue (push, settle) and sending it out of
-- Redis when its queue is over its bound.

-- Overflow (FRONTIER_OVERFLOW = "mongo"): a group keeps at most 'host_queue_max'
-- (NAME:frontier) requests in its queue; the rest go to MongoDB by way of the
-- list NAME:spill ("GROUP\nID\nLIFE\nORDER\nJSON" records, which nodes write
-- there: spilling.py) and come back best first as the queue drains (refill.lua).
-- LIFE numbers each trip out ('lives' in NAME:frontier): a request back in the
-- queue may go out again before its last trip's document is marked taken, and
-- the two documents must not be taken for one another.
-- NAME:overflow:GROUP: n (its requests out of Redis, in MongoDB or on their
-- way), floor (none of those has a better order: a request worse than it goes
-- out too, so the queue always holds the group's best), transit (on their way)
-- and tmin (the best order among those: a refill takes nothing worse until
-- they have landed). What is out of Redis still counts in 'queued'; 'spilled'
-- (NAME:frontier) counts it apart.
local function queue_max(F)
  if F.queue_max == nil then
    F.queue_max = tonumber(redis.call('HGET', F.frontier, 'host_queue_max') or '0') or 0
  end
  return F.queue_max
end

local function overflow_key(F, group)
  return crawl_base(F) .. 'overflow:' .. group
end

-- A group whose queue is down to half its bound and that has requests out of
-- Redis is due for a refill (NAME:refill: group -> when it may be claimed, ms).
local function want_refill(F, group)
  local limit = queue_max(F)
  if limit <= 0 or redis.call('ZCARD', F.queue_prefix .. group) * 2 > limit then return end
  if redis.call('EXISTS', overflow_key(F, group)) == 1 then
    redis.call('ZADD', crawl_base(F) .. 'refill', 'NX', 0, group)  -- a claim stands
  end
end

-- Send a request out of Redis: its record to NAME:spill, its JSON out of the
-- group's data (item = nil: read from there). False if it has no JSON (a lease
-- of it was dead-lettered meanwhile).
local function spill(F, group, score, id, item)
  if not item then
    item = redis.call('HGET', F.data_prefix .. group, id)
    if not item then return false end
  end
  redis.call('HDEL', F.data_prefix .. group, id)
  local order = string.format('%.0f', score)
  local life = redis.call('HINCRBY', F.frontier, 'lives', 1)
  redis.call('RPUSH', crawl_base(F) .. 'spill',
             group .. '\n' .. id .. '\n' .. life .. '\n' .. order .. '\n' .. item)
  local key = overflow_key(F, group)
  local state = redis.call('HMGET', key, 'floor', 'tmin')
  redis.call('HINCRBY', key, 'n', 1)
  redis.call('HINCRBY', key, 'transit', 1)
  if not tonumber(state[1] or '') or score < tonumber(state[1]) then
    redis.call('HSET', key, 'floor', order)
  end
  if not tonumber(state[2] or '') or score < tonumber(state[2]) then
    redis.call('HSET', key, 'tmin', order)
  end
  F.spilled = (F.spilled or 0) + 1
  want_refill(F, group)
  return true
end

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
-- With an overflow bound, a request worse than what is out of Redis, or the
-- worst of a queue over the bound, goes out (spill). F.refilling: requests
-- coming back, counted already. F: {queue_prefix, data_prefix, ready, waiting,
-- frontier, added = {}}; call settle(F) once at the end of the script.
local function push(F, group, score, id, item)
  local crawl = crawl_of(group)
  if has_ended(F, crawl) then
    if id and not item then redis.call('HDEL', F.data_prefix .. group, id) end
    count_crawl(F, crawl, 'removed', 1)
    return
  end
  local limit = 0
  if id and not F.refilling then limit = queue_max(F) end
  if limit > 0 then
    local floor = tonumber(redis.call('HGET', overflow_key(F, group), 'floor') or '')
    if floor and score > floor then
      if spill(F, group, score, id, item) then count_queued(F, group, crawl) end
      return
    end
  end
  local member = id or item
  if id and item then
    redis.call('HSET', F.data_prefix .. group, id, item)
  end
  local queue = F.queue_prefix .. group
  if redis.call('ZADD', queue, order_arg(score), member) == 1 then
    local best = F.added[group]
    F.added[group] = (best and math.min(best, score)) or score
    if not F.refilling then count_queued(F, group, crawl) end
    if limit > 0 and redis.call('ZCARD', queue) > limit then
      local tail = redis.call('ZPOPMAX', queue)
      if not spill(F, group, tonumber(tail[2]), tail[1], nil) then
        redis.call('ZADD', queue, tail[2], tail[1])  -- no JSON to send: it stays
      end
    end
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
  if F.spilled then redis.call('HINCRBY', F.frontier, 'spilled', F.spilled) end
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
  F.added, F.count, F.crawl_count, F.render_count, F.spilled = {}, nil, nil, nil, nil
end
