--! include _named _crawls _queues _leases
-- Return leases to the queue: all leases of nodes whose heartbeat is older than
-- dead_before, all leases of the node named in closing (a node that is closing),
-- and any lease whose deadline has passed.
-- Keys (by name, _named.lua): nodes (registry, zset, score = last heartbeat in
-- ms); ready (groups, zset); start_urls; waiting (groups, zset); frontier
-- (counters, hash).
-- Arguments:
--   now            ms since epoch
--   dead_before    heartbeats older than this (ms since epoch) mean the node is dead
--   leases_prefix  a node's leases live at prefix .. node id
--   closing        a node whose leases all go back now, or ''
--   forget_before  heartbeats older than this (ms since epoch): forget the node,
--                  so the registry, walked by every size check, does not grow
--                  with restarts
--   node_prefix    a node's record lives at prefix .. node id
--   start_leases_prefix  start-URL entries a node took and had not queued yet go
--                  back to start_urls with its leases: to the read end of a list,
--                  into a set, or into a sorted set at its highest score
--   start_type     list, set or zset
--   queue_prefix   leases go back to their group's queue
--   data_prefix    a lease's id keeps its JSON there, read for its priority
--                  (what the AOF gets is the id alone)
--   batch          the most leases one call returns: a node that died holding a
--                  million leases must not stall Redis; the caller calls again
--                  while more are left
-- Returns, by name: requests, start_entries (each a flat list of node id, number
-- returned, ...: nodes with 0 left out), more (1 when leases were left for the
-- next call)
-- (put_back comes from _leases.lua)
local K, A = named_input(true)
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready,
           waiting = K.waiting, frontier = K.frontier, added = {}}
local function give_back_start(key, kind, entries)
  if #entries == 0 then
    return
  end
  if kind == 'set' then
    redis.call('SADD', key, unpack(entries))
  elseif kind == 'zset' then
    -- the scores are gone with the pop; these were due first, so they are again
    local top = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
    local score = tonumber(top[2] or '0')
    for _, entry in ipairs(entries) do
      redis.call('ZADD', key, score, entry)
    end
  else
    for j = #entries, 1, -1 do  -- the oldest ends up rightmost: read first
      redis.call('RPUSH', key, entries[j])
    end
  end
end

local returned = {}
local returned_start = {}
local budget = tonumber(A.batch)
local more = 0
local back = {}  -- leases returned per crawl under an id
local nodes = redis.call('ZRANGE', K.nodes, 0, -1, 'WITHSCORES')
for i = 1, #nodes, 2 do
  if budget <= 0 then
    more = 1
    break
  end
  local node = nodes[i]
  local lease_key = A.leases_prefix .. node
  local items
  if node == A.closing or tonumber(nodes[i + 1]) < tonumber(A.dead_before) then
    items = redis.call('ZRANGE', lease_key, 0, budget - 1)
    if #items > 0 then
      redis.call('ZREMRANGEBYRANK', lease_key, 0, #items - 1)
    end
    local start_key = A.start_leases_prefix .. node
    local entries = redis.call('LRANGE', start_key, 0, -1)
    give_back_start(K.start_urls, A.start_type, entries)
    redis.call('DEL', start_key)
    if #entries > 0 then
      table.insert(returned_start, node)
      table.insert(returned_start, #entries)
    end
    local left = redis.call('ZCARD', lease_key)
    if left > 0 then
      more = 1
    elseif tonumber(nodes[i + 1]) < tonumber(A.forget_before) then
      redis.call('ZREM', K.nodes, node)
      redis.call('DEL', A.node_prefix .. node)
    end
  else
    -- the lowest scores first: the ranks ZREMRANGEBYRANK takes off below
    items = redis.call('ZRANGEBYSCORE', lease_key, '-inf', A.now, 'LIMIT', 0, budget)
    if #items > 0 then
      redis.call('ZREMRANGEBYRANK', lease_key, 0, #items - 1)
      if #items == budget and #redis.call('ZRANGEBYSCORE', lease_key, '-inf', A.now,
                                           'LIMIT', 0, 1) > 0 then
        more = 1
      end
    end
  end
  budget = budget - #items
  for _, member in ipairs(items) do
    put_back(F, member, back)
  end
  if #items > 0 then
    table.insert(returned, node)
    table.insert(returned, #items)
  end
end
for crawl, n in pairs(back) do count_crawl(F, crawl, 'in_flight', -n) end
settle(F)
return {'requests', returned, 'start_entries', returned_start, 'more', more}
