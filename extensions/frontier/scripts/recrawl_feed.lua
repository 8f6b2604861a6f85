--! include _entries _queues
-- Move pages due for a recrawl into their groups' queues, at most ARGV[2] of them.
-- Taken off the due set and queued in one script: a node dying meanwhile leaves
-- none behind and none queued twice, and no two nodes take the same page.
-- KEYS[1]  due pages (zset: fingerprint -> due ms)
-- KEYS[2]  revisit records (hash: fingerprint -> "GROUP\nJSON")
-- KEYS[3]  ready groups (zset)      KEYS[4]  waiting groups (zset)
-- KEYS[5]  frontier counters (hash: queued, seq)
-- ARGV[1]  now (ms)   ARGV[2]  at most this many
-- ARGV[3]  group queue key prefix   ARGV[4]  group data key prefix
-- Returns  how many pages were queued
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then
  return 0
end
local F = {queue_prefix = ARGV[3], data_prefix = ARGV[4], ready = KEYS[3], waiting = KEYS[4],
           frontier = KEYS[5], added = {}}
redis.call('ZREM', KEYS[1], unpack(due))
local records = redis.call('HMGET', KEYS[2], unpack(due))
local ids = new_ids(F, #due)
local queued = 0
for i = 1, #due do
  local record = records[i]
  if record then  -- a record forgotten meanwhile (the crawl cleared) is skipped
    local group, item = split_item(record)
    push(F, group, priority_score(item) + (tonumber(ids[i]) % SEQ_SPAN), ids[i], item)
    queued = queued + 1
  end
end
settle(F)
return queued
