--! include _entries _queues
-- Queue pages whose recrawl is due, taken from a status store outside Redis
-- (RECRAWL_STORE = "mongo"): each page's fingerprint is marked in KEYS[1] as it
-- is queued, and a page already marked (queued by a node that died before the
-- store heard of it) is not queued again. The mark goes with the release of the
-- page's lease, after its new status is in the store.
-- KEYS[1]  pages queued from the store (hash: fingerprint -> group)
-- KEYS[2]  ready groups (zset)      KEYS[3]  waiting groups (zset)
-- KEYS[4]  frontier counters (hash: queued, seq)
-- ARGV[1]  group queue key prefix   ARGV[2]  group data key prefix
-- ARGV[3..] fingerprint, group, request JSON; repeated
-- Returns  how many pages were queued
local F = {queue_prefix = ARGV[1], data_prefix = ARGV[2], ready = KEYS[2], waiting = KEYS[3],
           frontier = KEYS[4], added = {}}
local fresh = {}
for i = 3, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    fresh[#fresh + 1] = i
  end
end
if #fresh == 0 then
  return 0
end
local ids = new_ids(F, #fresh)
for n, i in ipairs(fresh) do
  local item = ARGV[i + 2]
  push(F, ARGV[i + 1], priority_score(item) + (tonumber(ids[n]) % SEQ_SPAN), ids[n], item)
end
settle(F)
return #fresh
