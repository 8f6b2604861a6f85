--! include _named _crawls _entries _queues _leases
-- Give leases of a live node back to their queues: leases the node holds in
-- Redis without knowing it (a lease whose answer the connection lost: the
-- command ran, its reply never came). The node names them; one it released or
-- that was handed back meanwhile is left alone.
-- Keys (by name, _named.lua): leases (the node's, zset, GROUP\nID); ready
-- (groups, zset); waiting (groups, zset); frontier (counters, hash).
-- Arguments: queue_prefix (a lease goes back to its group's queue), data_prefix
-- (a lease's id keeps its JSON there, read for its priority). Items: the lease
-- members to give back.
-- With held = '1' (leases a level above their host refused, claim_levels.lua):
-- the items are pairs, a member and when (ms) its group may be leased again,
-- which waits until then, its leases not counted as its host's (host_prefix).
-- Returns  how many went back
local K, A, L = named_input()
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready,
           waiting = K.waiting, frontier = K.frontier, added = {}}
local back = {}  -- leases given back per crawl under an id
local given = 0
local step = A.held == '1' and 2 or 1
local until_of, unleased = {}, {}
for i = 1, #L - step + 1, step do
  local member = L[i]
  if redis.call('ZREM', K.leases, member) == 1 then
    given = given + 1
    put_back(F, member, back)
    if step == 2 then
      local group = split_item(member)
      local host = host_part(group)
      until_of[group] = math.max(until_of[group] or 0, tonumber(L[i + 1]) or 0)
      unleased[host] = (unleased[host] or 0) + 1
    end
  end
end
for crawl, n in pairs(back) do count_crawl(F, crawl, 'in_flight', -n) end
settle(F)
-- the group waits for the slot its claim reserved, not for the pace its lease
-- set (the claim kept the host's pace too), so that it comes back as early as
-- the claim asked; a hold meanwhile (it pushed back) still holds it
for group, wait_until in pairs(until_of) do
  redis.call('ZREM', ready_of(F, crawl_of(group), lane_of(group)), group)
  local hold = tonumber(redis.call('HGET', A.host_prefix .. host_part(group), 'hold')) or 0
  if hold ~= hold or hold == math.huge then hold = 0 end  -- (no node writes those)
  redis.call('ZADD', K.waiting, math.ceil(math.max(wait_until, hold)), group)
end
for host, n in pairs(unleased) do redis.call('HINCRBY', A.host_prefix .. host, 'leased', -n) end
return given
