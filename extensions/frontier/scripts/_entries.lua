-- A queued request: its order in its group's queue, its id and its member.

-- The order of a request in its group's queue: priority first (higher first,
-- clamped to +-2^20 for the order only), then discovery order (lower sequence
-- number first). Both fit exactly in a double's 53 bits.
local SEQ_SPAN = 4294967296
local PRIORITY_SPAN = 1048575
local function order_score(priority, seq)
  local p = math.max(-PRIORITY_SPAN, math.min(PRIORITY_SPAN, math.floor(priority)))
  return -p * SEQ_SPAN + (seq % SEQ_SPAN)
end

-- An order as Redis is given it: an integral one (every order this code makes)
-- in integer digits, which Lua writes several times faster than the float
-- (%.17g) Redis would write a number in; any other as it is.
local EXACT = 2 ^ 53
local function order_arg(score)
  if score == math.floor(score) and score > -EXACT and score < EXACT then
    return string.format('%d', score)
  end
  return score
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
-- is queued: leasing, releasing and handing back move the id alone. (Earlier
-- versions' whole-JSON queue members are upgraded once, at a node's open:
-- upgrade_inline.lua.)

-- Ids for n new requests: the discovery counter's next n values, as text.
local function new_ids(F, n)
  local last = redis.call('HINCRBY', F.frontier, 'seq', n)
  local ids = {}
  for i = 1, n do
    ids[i] = string.format('%d', last - n + i)
  end
  return ids
end

-- Leases hold "GROUP\nID"; delayed retries hold "GROUP\nJSON": the group, then
-- the request (a member without its group, another writer's, is put under its host).
local function split_item(member)
  local at = string.find(member, '\n', 1, true)
  if not at then
    return host_of(member), member
  end
  return string.sub(member, 1, at - 1), string.sub(member, at + 1)
end
