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
-- is queued: leasing, releasing and handing back move the id alone. (Earlier
-- versions' whole-JSON queue members are upgraded once, at a node's open:
-- upgrade_inline.lua.)

-- Ids for n new requests: the discovery counter's next n values, as text.
local function new_ids(F, n)
  local last = redis.call('HINCRBY', F.frontier, 'seq', n)
  local ids = {}
  for i = 1, n do
    ids[i] = string.format('%.0f', last - n + i)
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

-- Crawls. A queue group is HOST, or HOST#CRAWL for a crawl started under an id
-- (scrapy seed --crawl ID): the host part keys what belongs to the host (its
-- politeness, holds, rates: shared by every crawl), the whole group what belongs
-- to the job (its queue, data and HOST_PAGE_BUDGET count). A crawl's keys sit
-- next to its groups' data (F.data_prefix is NAME:data:): NAME:crawls (crawl ->
-- state; absent = running; '*' = paused pauses every crawl), NAME:turns (crawls
-- with work ready -> how much they were given, by weight), NAME:crawl:ID (its
-- counters and settings), NAME:crawl:ID:ready (its groups ready: the crawl with
-- no id keeps NAME:ready) and NAME:crawl:ID:groups (every group it queued in).
local function crawl_of(group)
  return string.match(group, '#(%w[%w_.-]*)$') or ''
end

-- Render lane: a group HOST!render (HOST!render#CRAWL in a crawl) holds the
-- requests a browser must fetch, leased by render nodes alone. Its ready set and
-- turns are its crawl's with ':render' after them; its host is HOST, so both
-- lanes keep one pace per host. (A group name never holds '!': groups.clean.)
local RENDER_MARK = '!render'

local function job_part(group)
  return string.match(group, '^(.*)#%w[%w_.-]*$') or group
end

local function lane_of(group)
  local job = job_part(group)
  if #job > #RENDER_MARK and string.sub(job, -#RENDER_MARK) == RENDER_MARK then
    return 'render'
  end
  return ''
end

local function host_part(group)
  local job = job_part(group)
  if lane_of(group) == 'render' then return string.sub(job, 1, #job - #RENDER_MARK) end
  return job
end

-- The group less its lane: what HOST_PAGE_BUDGET counts (both lanes together).
local function budget_group(group)
  if lane_of(group) ~= 'render' then return group end
  local crawl = string.match(group, '#%w[%w_.-]*$') or ''
  return host_part(group) .. crawl
end

local function crawl_base(F)
  if not F.base then F.base = string.sub(F.data_prefix, 1, #F.data_prefix - 5) end
  return F.base
end

local function crawl_key(F, crawl, what)
  local key = crawl_base(F) .. 'crawl:' .. crawl
  if what then return key .. ':' .. what end
  return key
end

local function ready_of(F, crawl, lane)
  local key = F.ready
  if crawl ~= '' then key = crawl_key(F, crawl, 'ready') end
  if lane == 'render' then return key .. ':render' end
  return key
end

local function turns_of(F, lane)
  if lane == 'render' then return crawl_base(F) .. 'turns:render' end
  return crawl_base(F) .. 'turns'
end

-- running, paused, stopped or expired (read once per script and crawl)
local function crawl_state(F, crawl)
  F.states = F.states or {}
  local state = F.states[crawl]
  if not state then
    local fields = redis.call('HMGET', crawl_base(F) .. 'crawls', crawl, '*')
    state = fields[1] or 'running'
    if state == 'running' and fields[2] == 'paused' then state = 'paused' end
    F.states[crawl] = state
  end
  return state
end

local function has_ended(F, crawl)
  if crawl == '' then return false end
  local state = crawl_state(F, crawl)
  return state == 'stopped' or state == 'expired'
end

-- A counter of a crawl under an id (the crawl without one has the frontier's).
local function count_crawl(F, crawl, field, n)
  if crawl ~= '' and n ~= 0 then
    redis.call('HINCRBY', crawl_key(F, crawl), field, n)
  end
end

-- A running crawl with groups ready takes part in the turns of leasing (of its
-- lane: render groups take turns among themselves); it joins
-- at the turn of the crawl furthest behind, so an idle spell earns it no burst.
local function take_turn(F, crawl, lane)
  F.turned = F.turned or {}
  if F.turned[lane .. '\n' .. crawl] then return end
  F.turned[lane .. '\n' .. crawl] = true
  if crawl_state(F, crawl) ~= 'running' then return end
  local turns = turns_of(F, lane)
  if redis.call('ZSCORE', turns, crawl) then return end
  local first = redis.call('ZRANGE', turns, 0, 0, 'WITHSCORES')[2]
  redis.call('ZADD', turns, tonumber(first or '0'), crawl)
end

-- Whether a request of this group goes over its crawl's budget (NAME:crawl:ID
-- 'budget', CRAWL_PAGE_BUDGET or seed --budget: requests the crawl may be given;
-- per shard, its share): counted in the crawl's 'accepted', or 'dropped' when over.
local function over_crawl_budget(F, group)
  local crawl = crawl_of(group)
  if crawl == '' then return false end
  F.budgets = F.budgets or {}
  local limit = F.budgets[crawl]
  if limit == nil then
    limit = tonumber(redis.call('HGET', crawl_key(F, crawl), 'budget') or '0') or 0
    F.budgets[crawl] = limit
  end
  if limit <= 0 then return false end
  if redis.call('HINCRBY', crawl_key(F, crawl), 'accepted', 1) > limit then
    redis.call('HINCRBY', crawl_key(F, crawl), 'dropped', 1)
    return true
  end
  return false
end

-- Overflow (FRONTIER_OVERFLOW = "mongo"): a group keeps at most 'host_queue_max'
-- (NAME:frontier) requests in its queue; the rest go to MongoDB by way of the
-- list NAME:spill ("GROUP\nID\nLIFE\nORDER\nJSON" records, which nodes write
-- there: spilling.py) and come back best first as the queue drains (refill.lua).
-- LIFE numbers each trip out ('lives' in NAME:frontier): a request back in the
-- queue may go out again before its last trip's document is marked taken, and
-- the two documents must not be taken for one another.
-- NAME:overflow:GROUP: n (its requests out of Redis, in MongoDB or on their
-- way), floor (none of those has a better order: a request worse than it goes
-- out too, so the queue always holds the group's best), transit (on their way)
-- and tmin (the best order among those: a refill takes nothing worse until
-- they have landed). What is out of Redis still counts in 'queued'; 'spilled'
-- (NAME:frontier) counts it apart.
local function queue_max(F)
  if F.queue_max == nil then
    F.queue_max = tonumber(redis.call('HGET', F.frontier, 'host_queue_max') or '0') or 0
  end
  return F.queue_max
end

local function overflow_key(F, group)
  return crawl_base(F) .. 'overflow:' .. group
end

-- A group whose queue is down to half its bound and that has requests out of
-- Redis is due for a refill (NAME:refill: group -> when it may be claimed, ms).
local function want_refill(F, group)
  local limit = queue_max(F)
  if limit <= 0 or redis.call('ZCARD', F.queue_prefix .. group) * 2 > limit then return end
  if redis.call('EXISTS', overflow_key(F, group)) == 1 then
    redis.call('ZADD', crawl_base(F) .. 'refill', 'NX', 0, group)  -- a claim stands
  end
end

-- Send a request out of Redis: its record to NAME:spill, its JSON out of the
-- group's data (item = nil: read from there). False if it has no JSON (a lease
-- of it was dead-lettered meanwhile).
local function spill(F, group, score, id, item)
  if not item then
    item = redis.call('HGET', F.data_prefix .. group, id)
    if not item then return false end
  end
  redis.call('HDEL', F.data_prefix .. group, id)
  local order = string.format('%.0f', score)
  local life = redis.call('HINCRBY', F.frontier, 'lives', 1)
  redis.call('RPUSH', crawl_base(F) .. 'spill',
             group .. '\n' .. id .. '\n' .. life .. '\n' .. order .. '\n' .. item)
  local key = overflow_key(F, group)
  local state = redis.call('HMGET', key, 'floor', 'tmin')
  redis.call('HINCRBY', key, 'n', 1)
  redis.call('HINCRBY', key, 'transit', 1)
  if not tonumber(state[1] or '') or score < tonumber(state[1]) then
    redis.call('HSET', key, 'floor', order)
  end
  if not tonumber(state[2] or '') or score < tonumber(state[2]) then
    redis.call('HSET', key, 'tmin', order)
  end
  F.spilled = (F.spilled or 0) + 1
  want_refill(F, group)
  return true
end

local function count_queued(F, group, crawl)
  F.count = (F.count or 0) + 1
  if lane_of(group) == 'render' then F.render_count = (F.render_count or 0) + 1 end
  if crawl ~= '' then
    F.crawl_count = F.crawl_count or {}
    F.crawl_count[crawl] = (F.crawl_count[crawl] or 0) + 1
  end
end

-- Add a request to its group's queue: its id, with its JSON when the id is new
-- (item = nil puts back an id whose JSON is stored). A request of a crawl that
-- was stopped is dropped instead (its JSON too), counted in the crawl's 'removed'.
-- With an overflow bound, a request worse than what is out of Redis, or the
-- worst of a queue over the bound, goes out (spill). F.refilling: requests
-- coming back, counted already. F: {queue_prefix, data_prefix, ready, waiting,
-- frontier, added = {}}; call settle(F) once at the end of the script.
local function push(F, group, score, id, item)
  local crawl = crawl_of(group)
  if has_ended(F, crawl) then
    if id and not item then redis.call('HDEL', F.data_prefix .. group, id) end
    count_crawl(F, crawl, 'removed', 1)
    return
  end
  local limit = 0
  if id and not F.refilling then limit = queue_max(F) end
  if limit > 0 then
    local floor = tonumber(redis.call('HGET', overflow_key(F, group), 'floor') or '')
    if floor and score > floor then
      if spill(F, group, score, id, item) then count_queued(F, group, crawl) end
      return
    end
  end
  local member = id or item
  if id and item then
    redis.call('HSET', F.data_prefix .. group, id, item)
  end
  local queue = F.queue_prefix .. group
  if redis.call('ZADD', queue, score, member) == 1 then
    local best = F.added[group]
    F.added[group] = (best and math.min(best, score)) or score
    if not F.refilling then count_queued(F, group, crawl) end
    if limit > 0 and redis.call('ZCARD', queue) > limit then
      local tail = redis.call('ZPOPMAX', queue)
      if not spill(F, group, tonumber(tail[2]), tail[1], nil) then
        redis.call('ZADD', queue, tail[2], tail[1])  -- no JSON to send: it stays
      end
    end
  end
end

-- The queued counts (render_queued: those in render groups), and each group
-- that got work among its crawl's ready ones (unless politeness holds it back):
-- once per script and group, not per request.
local function settle(F)
  if F.count then
    redis.call('HINCRBY', F.frontier, 'queued', F.count)
  end
  if F.spilled then redis.call('HINCRBY', F.frontier, 'spilled', F.spilled) end
  if F.render_count then redis.call('HINCRBY', F.frontier, 'render_queued', F.render_count) end
  for crawl, n in pairs(F.crawl_count or {}) do
    count_crawl(F, crawl, 'queued', n)
  end
  for group, score in pairs(F.added) do
    local crawl = crawl_of(group)
    if crawl ~= '' then
      redis.call('SADD', crawl_key(F, crawl, 'groups'), group)
    end
    if not redis.call('ZSCORE', F.waiting, group) then
      local lane = lane_of(group)
      redis.call('ZADD', ready_of(F, crawl, lane), 'LT', score, group)
      take_turn(F, crawl, lane)
    end
  end
  F.added, F.count, F.crawl_count, F.render_count, F.spilled = {}, nil, nil, nil, nil
end

-- A number another writer left in a hash, or nil: absent, or malformed (not a
-- finite number >= 0), which is ignored and counted in P.bad.
local function number_field(P, value)
  if not value then return nil end
  local n = tonumber(value)
  if not n or n ~= n or n < 0 or n == math.huge then
    P.bad = P.bad + 1
    return nil
  end
  return n
end

-- A group's pacing: the interval (ms) its requests keep at the host, from its
-- configured rate (NAME:rates), its robots.txt Crawl-delay and its adaptive
-- rate ('arate' in its host hash, set once it pushed back); the spacing (ms)
-- leases and send slots keep, the interval plus the tolerance (and, for a slow
-- group, a margin); the window
-- (ms) a send may come after its slot; and whether the group is watched (it
-- pushed back: nodes report its good answers, so its rate climbs again), its hold end
-- (ms, 0: none) and its next send slot (ms, or nil). The window is the
-- tolerance, which keeps every two sends at least the interval apart. A node
-- later than that asks Redis, which lets it go at once when no later slot was
-- handed out yet: for a group slower than one request per two leads, nearly
-- always. A faster group's next slot is always out already, so there a late
-- send would cost a slot; its window is at least FAST_WINDOW_MS (a busy node's
-- timers fire that late), and two of its sends may come up to that much closer
-- than its interval. P: {rates, crawl_delay, host_prefix, delay_max (s),
-- tolerance (a fraction), lead (ms), default_rate, bad = 0}.
local FAST_WINDOW_MS = 25
-- A slow group's slots are further apart by a margin (a fifth of its interval,
-- at most 100 ms): a node may be held up between its on-time check and the wire
-- (a starved CPU, the server's own loop), and its send then comes that much
-- closer to the next one; the margin keeps the interval at the host.
local SLOW_MARGIN_SHARE, SLOW_MARGIN_MS = 0.2, 100
local function host_pacing(P, group, now)
  local rate = number_field(P, redis.call('HGET', P.rates, group)) or P.default_rate
  local fields = redis.call('HMGET', P.host_prefix .. group, 'arate', 'hold', 'win', 'next', 'ew')
  local arate = number_field(P, fields[1])
  local hold = number_field(P, fields[2]) or 0
  P.window_start = number_field(P, fields[3])
  local next_slot = number_field(P, fields[4])
  -- refused lately (the evidence is being gathered): its good answers count too
  local evidence_until = number_field(P, fields[5]) or 0
  if arate and arate > 0 and (rate <= 0 or arate < rate) then
    rate = arate
  end
  local interval = 0
  if rate > 0 then
    interval = 1000 / rate
  end
  local delay = number_field(P, redis.call('HGET', P.crawl_delay, group)) or 0
  interval = math.max(interval, math.min(delay, P.delay_max) * 1000)
  local spacing = interval * (1 + P.tolerance)
  local window = interval * P.tolerance
  if spacing <= 2 * P.lead then
    window = math.max(window, FAST_WINDOW_MS)
  else
    spacing = spacing + math.min(interval * SLOW_MARGIN_SHARE, SLOW_MARGIN_MS)
  end
  return interval, spacing, window, arate ~= nil or hold > now or evidence_until > now, hold,
    next_slot
end

-- The rate a group is leased at, for the whole cluster ('orate', requests/s
-- over the last OBSERVE_MS; 'win' and 'wl', when the current window began and
-- the group's leased count then): what a pushback halves when the group has no
-- rate of its own. One write per group every OBSERVE_MS, none in between
-- (host_pacing read the window's start just before).
local OBSERVE_MS = 10000
local function observe(P, counters, now, leased)
  local start = P.window_start
  if start and now - start < OBSERVE_MS then return end
  if start then
    local at_start = number_field(P, redis.call('HGET', counters, 'wl')) or leased
    local rate = (leased - at_start) * 1000 / (now - start)
    redis.call('HSET', counters, 'orate', string.format('%.3f', rate), 'win', now, 'wl', leased)
  else
    redis.call('HSET', counters, 'win', now, 'wl', leased)
  end
end

-- The exact dupefilter's levels: level L has 4096 * 4^L buckets (small hashes,
-- prefix .. L .. ':' .. BUCKET) and takes new fingerprints while the filter
-- holds fewer than its capacity (90 per bucket, counting the levels below); a
-- fingerprint's bucket is its first bytes, its field the 7 bytes after them.
local TAIL = 12
local FIRST_BUCKETS = 4096
local PER_BUCKET = 90

-- The level that takes the fingerprint the filter counts as its (count + 1)th.
local function level_for(count)
  local top, capacity, buckets = 0, FIRST_BUCKETS * PER_BUCKET, FIRST_BUCKETS
  while count >= capacity and top < 9 do
    top = top + 1
    buckets = buckets * 4
    capacity = capacity + buckets * PER_BUCKET
  end
  return top
end

local function bucket_key(level_prefix, fp, level)
  local b1, b2, b3, b4 = string.byte(fp, 1, 4)
  local word = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  local bits = 12 + 2 * level
  return level_prefix .. level .. ':' .. math.floor(word / 2 ^ (32 - bits))
end

local function fingerprint_field(fp)
  return string.sub(fp, 5, 11)
end
