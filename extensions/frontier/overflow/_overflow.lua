--! include _hooks _crawls _queues
-- Overflow (FRONTIER_OVERFLOW = "mongo"): the overflow part's piece, in the
-- crawl's manifest when the crawl has it (part.py), and in its own scripts.
-- A group keeps at most 'host_queue_max' (NAME:frontier) requests in its
-- queue; the rest go to MongoDB by way of the list NAME:spill
-- ("GROUP\nID\nLIFE\nORDER\nJSON" records, which nodes write there:
-- spilling.py) and come back best first as the queue drains (refill.lua).
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

-- A new request worse than what the group has out of Redis goes out too (a
-- put-back id whose JSON went meanwhile goes nowhere).
fill('diverted', function(F, group, score, id, item)
  if queue_max(F) <= 0 then return false end
  local floor = tonumber(redis.call('HGET', overflow_key(F, group), 'floor') or '')
  if not floor or score <= floor then return false end
  if spill(F, group, score, id, item) then count_queued(F, group, crawl_of(group)) end
  return true
end)

-- A queue over its bound sends its worst out.
fill('queued', function(F, group, queue)
  local limit = queue_max(F)
  if limit > 0 and redis.call('ZCARD', queue) > limit then
    local tail = redis.call('ZPOPMAX', queue)
    if not spill(F, group, tonumber(tail[2]), tail[1], nil) then
      redis.call('ZADD', queue, tail[2], tail[1])  -- no JSON to send: it stays
    end
  end
end)

fill('taken', want_refill)

-- what a stopped crawl's group has in MongoDB comes back to be dropped the
-- same way (refill.lua)
fill('emptied', function(F, group)
  if redis.call('EXISTS', overflow_key(F, group)) == 1 then
    redis.call('ZADD', crawl_base(F) .. 'refill', 0, group)
  end
end)

fill('settled', function(F)
  if F.spilled then redis.call('HINCRBY', F.frontier, 'spilled', F.spilled) end
  F.spilled = nil
end)
