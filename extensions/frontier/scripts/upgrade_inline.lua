--! include _entries
-- Upgrade the whole-JSON members of earlier versions in a group's queue, or in a
-- node's leases, into ids with their JSON in the group's data hash (what every
-- script now reads), keeping each member's score.
-- KEYS[1]  the queue (GROUP's: members are JSON) or the leases (members are
--          GROUP\nJSON, or JSON alone)
-- KEYS[2]  frontier counters (hash: seq, the source of ids)
-- ARGV[1]  group data key prefix   ARGV[2]  '1' for leases, '0' for a queue
-- ARGV[3]  the queue's group (a queue only)   ARGV[4..] the members to upgrade
-- Returns  how many were upgraded
local leases = ARGV[2] == '1'
local upgraded = 0
local members = {}
for i = 4, #ARGV do members[#members + 1] = ARGV[i] end
local F = {frontier = KEYS[2]}
local ids = #members > 0 and new_ids(F, #members) or {}
for i, member in ipairs(members) do
  local score = redis.call('ZSCORE', KEYS[1], member)
  if score then
    local group, json = ARGV[3], member
    if leases then group, json = split_item(member) end
    redis.call('HSET', ARGV[1] .. group, ids[i], json)
    redis.call('ZREM', KEYS[1], member)
    redis.call('ZADD', KEYS[1], score, leases and (group .. '\n' .. ids[i]) or ids[i])
    upgraded = upgraded + 1
  end
end
return upgraded
