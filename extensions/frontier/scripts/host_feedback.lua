--! include _named _fields _pacing _politeness
-- What hosts answered, from one node: each answer goes through the politeness
-- law (_politeness.lua), which decides from the host's fields alone; this
-- script reads them, writes what the law decided, atomically, and tells the
-- nodes of the holds it set.
-- Keys (by name, _named.lua): ready, waiting (groups, zsets); rates (hash:
-- group or '*' -> requests per second); held (groups, zset -> hold end, ms);
-- banned (of those, the banned ones); holds (a stream: each hold set here, g =
-- group, u = its end in ms, for the nodes to hear of; the last HOLDS_KEPT or so).
-- (with CLUSTER_IP_RATE, the address level ip_prefix .. ADDRESS: next, cut, why;
--  and ADDRESS:refused, a zset: its hosts held lately)
-- (each group's host hash, host_prefix .. GROUP: the law's HOST_FIELDS, and
--  ew (watched until), lat, cut, pushbacks, page_refusals, bans; ip)
-- Arguments:
--   now           ms since epoch          host_prefix  host hash key prefix
--   base, cap     HOST_BACKOFF_BASE and HOST_BACKOFF_MAX (ms)
--   forgive       HOST_BACKOFF_FORGIVE (ms): one strike forgiven per this much quiet
--   adaptive      1 = adaptive rate on    floor_rate   its floor (requests/s)
--   window        HOST_BACKOFF_WINDOW (ms): the evidence window's time constant
--   step          ms between two raises   raise        the fraction a recovering raise adds
--   share         HOST_BACKOFF_SHARE      min_refusals HOST_BACKOFF_MIN_REFUSALS
--   ip_prefix     the address levels' key prefix (lease.lua)
--   levels_apart  '1' for a sharded frontier: the addresses are another slot's
-- Items: the events, six each: group; kind ('push': a page refused for the
-- first time lately; 'again': a page refused again, which says more of the page
-- than of the host; 'ban'; 'errors'; 'ok'); Retry-After in ms (-1: none; for
-- 'ok' the answers counted); the mean latency in ms ('ok'); a random fraction
-- in [0, 1) for the jitter of the hold; the answers of the host the node saw
-- and did not report yet (its own recent history, decayed to now).
-- Returns, by name: held ({group, hold until (ms), reason, adaptive rate or ''}
-- for each group held or slowed by these events), bad (malformed host fields
-- ignored), address_refused (with levels_apart: {group, address, hold until
-- (ms), reason} of each host held, for address_cut.lua)
local HOLDS_KEPT = 1000  -- holds set faster than nodes poll them are left to the leases
local K, A, E = named_input()
local now = tonumber(A.now)
local host_prefix = A.host_prefix
local C = {now = now, base = tonumber(A.base), cap = tonumber(A.cap),
           forgive = tonumber(A.forgive), adaptive = A.adaptive == '1',
           floor_rate = tonumber(A.floor_rate), window = math.max(tonumber(A.window), 1000),
           step = tonumber(A.step), raise = tonumber(A.raise), share = tonumber(A.share),
           min_refusals = tonumber(A.min_refusals)}
local P = {bad = 0}
local default_rate = number_field(P, redis.call('HGET', K.rates, '*')) or 0
read_level_rates(P, K.rates)
local out = {}
-- With CLUSTER_IP_RATE, a host held on evidence of its own is evidence against
-- its address (_pacing.lua refused_at_address); with levels_apart (a sharded
-- frontier) the address is another slot's: it is named for the node to tell.
local apart = {}
local function address_refused(group, hold, kind)
  if P.ip_rate <= 0 or not A.ip_prefix then return end
  local ip = redis.call('HGET', host_prefix .. group, 'ip')
  -- (no address or a failed lookup: no level to slow; one no node writes is counted)
  if not ip or ip == '' or ip == '?' or ip == '-' then return end
  if malformed(P, ip, '^[%x:%.]+$', 45) then return end
  if A.levels_apart == '1' then
    apart[#apart + 1] = {group, ip, string.format('%.0f', hold), kind}
    return
  end
  refused_at_address(A.ip_prefix .. ip, group, hold, kind, now, C.window)
end

-- the host's state as the law reads it: its fields, and its configured rate
local function host_state(key, group)
  local values = redis.call('HMGET', key, unpack(HOST_FIELDS))
  local s = {}
  for i, name in ipairs(HOST_FIELDS) do
    if values[i] then s[name] = values[i] end
  end
  s.rate = number_field(P, redis.call('HGET', K.rates, group)) or default_rate
  return s
end

local function write(key, group, d)
  local fields = {}
  for name, value in pairs(d.set) do
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
  if #d.del > 0 then redis.call('HDEL', key, unpack(d.del)) end
  for name, n in pairs(d.incr) do redis.call('HINCRBY', key, name, n) end
  redis.call('HINCRBYFLOAT', key, 'an', d.an)
  if d.hold then
    -- the group waits for every node, even with no work now: a request found
    -- meanwhile waits too
    redis.call('ZREM', K.ready, group)
    redis.call('ZADD', K.waiting, 'GT', d.hold, group)
    redis.call('ZADD', K.held, 'GT', d.hold, group)
  end
  if d.banned == true then
    redis.call('ZADD', K.banned, 'GT', d.hold, group)
  elseif d.banned == false then
    redis.call('ZREM', K.banned, group)
  end
  if d.out then out[#out + 1] = {group, d.out[1], d.out[2], d.out[3]} end
  if d.address then address_refused(group, d.address[1], d.address[2]) end
end

for i = 1, #E - 5, 6 do  -- the events, six items each
  local group, kind = E[i], E[i + 1]
  local value, latency, jitter = tonumber(E[i + 2]), tonumber(E[i + 3]), tonumber(E[i + 4])
  local history = tonumber(E[i + 5]) or 0
  if history ~= history or history < 0 then history = 0 end
  local key = host_prefix .. group
  local s = host_state(key, group)
  if kind == 'ok' then
    write(key, group, law_answered(P, s, C, value, latency))
  else
    write(key, group, law_refused(P, s, C, kind, value, jitter, history))
  end
end
-- every node hears of a hold at its next poll of the stream, not at its next
-- lease: what it leased before waits with the host instead of going inside the hold
for _, h in ipairs(out) do
  if h[3] ~= 'restored' and tonumber(h[2]) > now then
    redis.call('XADD', K.holds, 'MAXLEN', '~', HOLDS_KEPT, '*', 'g', h[1], 'u', h[2])
  end
end
-- holds that are over leave the registries (what is left is what holds now)
redis.call('ZREMRANGEBYSCORE', K.held, '-inf', now)
redis.call('ZREMRANGEBYSCORE', K.banned, '-inf', now)
return {'held', out, 'bad', P.bad, 'address_refused', apart}
