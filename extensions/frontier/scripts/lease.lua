-- Move due retries into the queue, then lease the highest-priority requests.
-- KEYS[1]  request queue (zset, score = -priority)
-- KEYS[2]  this node's leases (zset, score = lease deadline in ms)
-- KEYS[3]  node registry (zset, score = last heartbeat in ms)
-- KEYS[4]  delayed retries (zset, score = due time in ms)
-- ARGV[1]  how many requests at most
-- ARGV[2]  lease deadline (ms since epoch)
-- ARGV[3]  this node's id
-- ARGV[4]  now (ms since epoch): leasing counts as a heartbeat, so a lease is
--          never held by a node the others cannot see
-- Returns  {leased request JSON strings best first, due time (ms) of the next
--          delayed request or false}: an idle node sleeps until then at most.
-- (priority_score comes from _priority.lua, prepended when loading)
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[4], 'LIMIT', 0, 500)
for _, item in ipairs(due) do
  redis.call('ZREM', KEYS[4], item)
  redis.call('ZADD', KEYS[1], priority_score(item), item)
end
local items = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #items == 0 then
  local next_due = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')[2]
  return {items, next_due or false}
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #items - 1)
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
for _, item in ipairs(items) do
  redis.call('ZADD', KEYS[2], ARGV[2], item)
end
return {items, false}
