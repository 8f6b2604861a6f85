--! include _named _entries _crawls
-- Drop finished requests from a node's leases, and their JSON with them.
-- Keys (by name, _named.lua): leases (the node's, zset, GROUP\nID).
-- Arguments: data_prefix (group data key prefix). Items: the lease members
-- finished.
-- Returns  how many were still leased to the node
-- A lease already handed back (its node was taken for dead) is left alone: its
-- id may be queued or leased again, and its JSON is still needed.
local K, A, L = named_input()
local F = {data_prefix = A.data_prefix}
local gone, ids_of, done = {}, {}, {}  -- done: finished per crawl under an id
-- which are still leased: one ZMSCORE (Redis 6.2) per 1,000 members
for from = 1, #L, 1000 do
  local last = math.min(from + 999, #L)
  local scores = redis.call('ZMSCORE', K.leases, unpack(L, from, last))
  for at = from, last do
    if scores[at - from + 1] then
      local member = L[at]
      gone[#gone + 1] = member
      local group, id = split_item(member)
      ids_of[group] = ids_of[group] or {}
      table.insert(ids_of[group], id)
      local crawl = crawl_of(group)
      if crawl ~= '' then done[crawl] = (done[crawl] or 0) + 1 end
    end
  end
end
-- one command per key, in chunks that fit Lua's stack
local function in_chunks(command, key, values)
  for from = 1, #values, 1000 do
    redis.call(command, key, unpack(values, from, math.min(from + 999, #values)))
  end
end
in_chunks('ZREM', K.leases, gone)
for group, ids in pairs(ids_of) do
  in_chunks('HDEL', A.data_prefix .. group, ids)
end
for crawl, n in pairs(done) do count_crawl(F, crawl, 'in_flight', -n) end
return #gone
