-- Shared by the scripts (Lua scripts cannot import one another: this file is
-- prepended to each when it is loaded).

-- The order of a request in its group's queue: priority first (higher first,
-- clamped to +-2^20 for the order only), then discovery order (lower sequence
-- number first). Both fit exactly in a double's 53 bits.
local SEQ_SPAN = 4294967296
local PRIORITY_SPAN = 1048575
local function order_score(priority, seq)
  local p = math.max(-PRIORITY_SPAN, math.min(PRIORITY_SPAN, math.floor(priority)))
  return -p * SEQ_SPAN + (seq % SEQ_SPAN)
end

-- The order of a request read back from its JSON (a retry due, a lease handed
-- back): its priority, ahead of the requests of that priority found since.
local function priority_score(item)
  local ok, request = pcall(cjson.decode, item)
  if ok and type(request) == 'table' and tonumber(request['priority']) then
    return order_score(tonumber(request['priority']), 0)
  end
  return 0
end

-- The host of a request's URL, for entries written before queues were per group.
local function host_of(item)
  local ok, request = pcall(cjson.decode, item)
  local url = ok and type(request) == 'table' and request['url']
  if type(url) ~= 'string' then
    return ''
  end
  local authority = string.match(url, '^[%a][%w+.-]*://([^/?#]*)') or ''
  authority = string.gsub(authority, '^.*@', '')
  authority = string.gsub(authority, ':%d*$', '')
  return string.lower(authority)
end

-- A queued request is an id in its group's queue (NAME:queue:GROUP); its JSON is
-- in the group's data hash (NAME:data:GROUP) under that id, written once when it
-- is queued: leasing, releasing and handing back move the id alone. A queue
-- member that starts with '{' is a whole JSON request queued by an earlier
-- version, leased and handed back as it is.
local function is_inline(item)
  return string.byte(item, 1) == 123
end

-- Ids for n new requests: the discovery counter's next n values, as text.
local function new_ids(F, n)
  local last = redis.call('HINCRBY', F.frontier, 'seq', n)
  local ids = {}
  for i = 1, n do
    ids[i] = string.format('%.0f', last - n + i)
  end
  return ids
end

-- Leases hold "GROUP\nID" (or "GROUP\nJSON" for an inline request); delayed
-- retries hold "GROUP\nJSON": the group, then the request.
local function split_item(member)
  local at = string.find(member, '\n', 1, true)
  if not at then
    return host_of(member), member
  end
  return string.sub(member, 1, at - 1), string.sub(member, at + 1)
end

-- Add a request to its group's queue: its id, with its JSON when the id is new
-- (item = nil puts back an id whose JSON is stored; id = nil an inline request).
-- F: {queue_prefix, data_prefix, ready, waiting, frontier, added = {}}; call
-- settle(F) once at the end of the script.
local function push(F, group, score, id, item)
  local member = id or item
  if id and item then
    redis.call('HSET', F.data_prefix .. group, id, item)
  end
  if redis.call('ZADD', F.queue_prefix .. group, score, member) == 1 then
    local best = F.added[group]
    F.added[group] = (best and math.min(best, score)) or score
    F.count = (F.count or 0) + 1
  end
end

-- The queued count, and each group that got work among the ready ones (unless
-- politeness holds it back): once per script and group, not once per request.
local function settle(F)
  if not F.count then return end
  redis.call('HINCRBY', F.frontier, 'queued', F.count)
  for group, score in pairs(F.added) do
    if not redis.call('ZSCORE', F.waiting, group) then
      redis.call('ZADD', F.ready, 'LT', score, group)
    end
  end
  F.added, F.count = {}, nil
end
