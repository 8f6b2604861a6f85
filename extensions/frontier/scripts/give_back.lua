--! include _named _crawls _queues _leases
-- Give leases of a live node back to their queues: leases the node holds in
-- Redis without knowing it (a lease whose answer the connection lost: the
-- command ran, its reply never came). The node names them; one it released or
-- that was handed back meanwhile is left alone.
-- Keys (by name, _named.lua): leases (the node's, zset, GROUP\nID); ready
-- (groups, zset); waiting (groups, zset); frontier (counters, hash).
-- Arguments: queue_prefix (a lease goes back to its group's queue), data_prefix
-- (a lease's id keeps its JSON there, read for its priority). Items: the lease
-- members to give back.
-- Returns  how many went back
local K, A, L = named_input()
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready,
           waiting = K.waiting, frontier = K.frontier, added = {}}
local back = {}  -- leases given back per crawl under an id
local given = 0
for _, member in ipairs(L) do
  if redis.call('ZREM', K.leases, member) == 1 then
    given = given + 1
    put_back(F, member, back)
  end
end
for crawl, n in pairs(back) do count_crawl(F, crawl, 'in_flight', -n) end
settle(F)
return given
