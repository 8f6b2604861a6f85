--! include _named _crawls
-- Pause, resume or end a crawl in one scope of the frontier (NAME, or a shard).
-- Keys (by name, _named.lua): crawls (hash: crawl -> state), turns (zset),
-- ready (groups of the crawl without an id, NAME:ready).
-- Arguments: op ('pause', 'resume', 'stopped' or 'expired'); crawl (the crawl
-- id; '*' = every crawl, '' = the crawl without an id); data_prefix (NAME:data:,
-- the crawls' keys sit next to it).
-- Returns  the crawl's state before
local K, A = named_input()
local F = {data_prefix = A.data_prefix, ready = K.ready, waiting = '', added = {}}
local op, crawl = A.op, A.crawl
local before = redis.call('HGET', K.crawls, crawl) or 'running'
if op == 'pause' then
  if before == 'running' then redis.call('HSET', K.crawls, crawl, 'paused') end
  if crawl == '*' then
    redis.call('DEL', K.turns, turns_of(F, 'render'))
  else
    redis.call('ZREM', K.turns, crawl)
    redis.call('ZREM', turns_of(F, 'render'), crawl)
  end
elseif op == 'resume' then
  local resumed = {crawl}
  if crawl == '*' then
    resumed = {''}
    local all = redis.call('HGETALL', K.crawls)
    for i = 1, #all, 2 do
      if all[i + 1] == 'paused' and all[i] ~= '*' then redis.call('HSET', K.crawls, all[i], 'running') end
      if all[i] ~= '*' then resumed[#resumed + 1] = all[i] end
    end
    redis.call('HDEL', K.crawls, '*')
  elseif before == 'paused' then
    redis.call('HSET', K.crawls, crawl, 'running')
  end
  for _, name in ipairs(resumed) do
    for _, lane in ipairs({'', 'render'}) do
      if redis.call('ZCARD', ready_of(F, name, lane)) > 0 then take_turn(F, name, lane) end
    end
  end
else
  redis.call('HSET', K.crawls, crawl, op)
  redis.call('ZREM', K.turns, crawl)
  redis.call('ZREM', turns_of(F, 'render'), crawl)
end
return before
