--! include _entries _crawls _queues
-- A lease handed back: its request into its group's queue again, at the
-- priority its JSON says (what the AOF gets is the id alone), and counted in
-- back (leases handed back per crawl under an id: count_crawl's in_flight).
local function put_back(F, member, back)
  local group, id = split_item(member)
  local data = redis.call('HGET', F.data_prefix .. group, id) or ''
  push(F, group, priority_score(data), id, nil)
  local crawl = crawl_of(group)
  if crawl ~= '' then back[crawl] = (back[crawl] or 0) + 1 end
end
