--! include _crawls
-- Pause, resume or end a crawl in one scope of the frontier (NAME, or a shard).
-- KEYS[1]  crawls (hash: crawl -> state)   KEYS[2]  turns (zset)
-- KEYS[3]  ready groups of the crawl without an id (NAME:ready)
-- ARGV[1]  'pause', 'resume', 'stopped' or 'expired'
-- ARGV[2]  the crawl id; '*' = every crawl, '' = the crawl without an id
-- ARGV[3]  group data key prefix (NAME:data:): the crawls' keys sit next to it
-- Returns  the crawl's state before
local F = {data_prefix = ARGV[3], ready = KEYS[3], waiting = '', added = {}}
local op, crawl = ARGV[1], ARGV[2]
local before = redis.call('HGET', KEYS[1], crawl) or 'running'
if op == 'pause' then
  if before == 'running' then redis.call('HSET', KEYS[1], crawl, 'paused') end
  if crawl == '*' then
    redis.call('DEL', KEYS[2], turns_of(F, 'render'))
  else
    redis.call('ZREM', KEYS[2], crawl)
    redis.call('ZREM', turns_of(F, 'render'), crawl)
  end
elseif op == 'resume' then
  local resumed = {crawl}
  if crawl == '*' then
    resumed = {''}
    local all = redis.call('HGETALL', KEYS[1])
    for i = 1, #all, 2 do
      if all[i + 1] == 'paused' and all[i] ~= '*' then redis.call('HSET', KEYS[1], all[i], 'running') end
      if all[i] ~= '*' then resumed[#resumed + 1] = all[i] end
    end
    redis.call('HDEL', KEYS[1], '*')
  elseif before == 'paused' then
    redis.call('HSET', KEYS[1], crawl, 'running')
  end
  for _, name in ipairs(resumed) do
    for _, lane in ipairs({'', 'render'}) do
      if redis.call('ZCARD', ready_of(F, name, lane)) > 0 then take_turn(F, name, lane) end
    end
  end
else
  redis.call('HSET', KEYS[1], crawl, op)
  redis.call('ZREM', KEYS[2], crawl)
  redis.call('ZREM', turns_of(F, 'render'), crawl)
end
return before
