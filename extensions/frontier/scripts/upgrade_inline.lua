--! include _named _entries
-- Upgrade the whole-JSON members of earlier versions in a group's queue, or in a
-- node's leases, into ids with their JSON in the group's data hash (what every
-- script now reads), keeping each member's score.
-- Keys (by name, _named.lua): members (the queue, GROUP's: members are JSON;
-- or the leases: members are GROUP\nJSON, or JSON alone); frontier (counters:
-- seq, the source of ids).
-- Arguments: data_prefix (group data key prefix), leases ('1' for leases, '0'
-- for a queue), group (the queue's group, a queue only). Items: the members to
-- upgrade.
-- Returns  how many were upgraded
local K, A, members = named_input()
local leases = A.leases == '1'
local upgraded = 0
local F = {frontier = K.frontier}
local ids = #members > 0 and new_ids(F, #members) or {}
for i, member in ipairs(members) do
  local score = redis.call('ZSCORE', K.members, member)
  if score then
    local group, json = A.group, member
    if leases then group, json = split_item(member) end
    redis.call('HSET', A.data_prefix .. group, ids[i], json)
    redis.call('ZREM', K.members, member)
    redis.call('ZADD', K.members, score, leases and (group .. '\n' .. ids[i]) or ids[i])
    upgraded = upgraded + 1
  end
end
return upgraded
