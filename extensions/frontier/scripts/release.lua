--! include _entries _crawls
-- Drop finished requests from a node's leases, and their JSON with them.
-- KEYS[1]  the node's leases (zset, GROUP\nID)
-- ARGV[1]  group data key prefix   ARGV[2..]  the lease members finished
-- Returns  how many were still leased to the node
-- A lease already handed back (its node was taken for dead) is left alone: its
-- id may be queued or leased again, and its JSON is still needed.
local F = {data_prefix = ARGV[1]}
local gone, ids_of, done = {}, {}, {}  -- done: finished per crawl under an id
for i = 2, #ARGV do
  local member = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], member) then
    gone[#gone + 1] = member
    local group, id = split_item(member)
    ids_of[group] = ids_of[group] or {}
    table.insert(ids_of[group], id)
    local crawl = crawl_of(group)
    if crawl ~= '' then done[crawl] = (done[crawl] or 0) + 1 end
  end
end
-- one command per key, in chunks that fit Lua's stack
local function in_chunks(command, key, values)
  for from = 1, #values, 1000 do
    redis.call(command, key, unpack(values, from, math.min(from + 999, #values)))
  end
end
in_chunks('ZREM', KEYS[1], gone)
for group, ids in pairs(ids_of) do
  in_chunks('HDEL', ARGV[1] .. group, ids)
end
for crawl, n in pairs(done) do count_crawl(F, crawl, 'in_flight', -n) end
return #gone
