--! include _named _entries _queues
-- Move pages due for a recrawl into their groups' queues, at most limit of them.
-- Taken off the due set and queued in one script: a node dying meanwhile leaves
-- none behind and none queued twice, and no two nodes take the same page.
-- Keys (by name, _named.lua): due (pages, zset: fingerprint -> due ms); revisit
-- (records, hash: fingerprint -> "GROUP\nJSON"); ready, waiting (groups, zsets);
-- frontier (counters: queued, seq).
-- Arguments: now (ms), limit (at most this many), queue_prefix, data_prefix
-- (group queue and data key prefixes).
-- Returns  how many pages were queued
local K, A = named_input(true)
local due = redis.call('ZRANGEBYSCORE', K.due, '-inf', A.now, 'LIMIT', 0, tonumber(A.limit))
if #due == 0 then
  return 0
end
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready, waiting = K.waiting,
           frontier = K.frontier, added = {}}
redis.call('ZREM', K.due, unpack(due))
local records = redis.call('HMGET', K.revisit, unpack(due))
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
