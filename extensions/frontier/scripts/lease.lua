-- Lease requests to a node: from the groups (hosts) that are ready, the best
-- first, a fair share each; politeness is decided here, once per group.
-- KEYS[1]  this node's leases (zset, GROUP\nID -> lease deadline in ms)
-- KEYS[2]  node registry (zset, score = last heartbeat in ms)
-- KEYS[3]  delayed retries (zset, GROUP\nJSON -> due time in ms)
-- KEYS[4]  ready groups (zset, group -> order of its first request)
-- KEYS[5]  waiting groups (zset, group -> time it may be leased again, ms)
-- KEYS[6]  frontier counters (hash: queued)
-- KEYS[7]  rates (hash: group or '*' -> requests per second)
-- KEYS[8]  robots.txt Crawl-delay per group (hash, seconds)
-- (each group's host hash, ARGV[6] .. GROUP: next, leased, arate, hold, and the
--  observed rate: orate, win, wl)
-- ARGV[1]  how many requests at most     ARGV[2]  lease deadline (ms since epoch)
-- ARGV[3]  this node's id                ARGV[4]  now (ms since epoch): leasing
--          counts as a heartbeat, so a lease is never held by a node the others cannot see
-- ARGV[5]  group queue key prefix        ARGV[6]  group counters key prefix
-- ARGV[7]  the most seconds a Crawl-delay may ask for
-- ARGV[8]  seconds of a rate-limited group's requests one lease may hand out
--          at once (at least one request)
-- ARGV[9]  group data key prefix: each queued request's JSON by id
-- ARGV[10] the send tolerance: the fraction of a paced group's interval a send
--          may be late by (slots are spaced by the interval plus that)
-- ARGV[11] ms before its next slot a paced group may be leased, so its request
--          is at the node, waiting for its slot, when the slot comes
-- Returns  {leases (GROUP\nID, rate-limited groups first), their JSON in the same
--          order ('' for a missing one), the time (ms) the next waiting group or
--          delayed retry is due, or false (an idle node sleeps until then at
--          most), each lease's send slot 'SLOT:WINDOW' (ms since epoch, and ms it
--          may be sent after it; '0': unpaced, send at once), the
--          watched groups among those leased (they pushed back: their good
--          answers are reported), how many malformed host fields were ignored}
local F = {queue_prefix = ARGV[5], data_prefix = ARGV[9], ready = KEYS[4], waiting = KEYS[5],
           frontier = KEYS[6], added = {}}
local count = tonumber(ARGV[1])
local now = tonumber(ARGV[4])

-- retries whose backoff has passed go back to their group's queue
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 500)
local due_ids = #due > 0 and new_ids(F, #due) or {}
for i, member in ipairs(due) do
  redis.call('ZREM', KEYS[3], member)
  local group, item = split_item(member)
  push(F, group, priority_score(item), due_ids[i], item)
end
settle(F)

-- groups whose politeness wait is over become ready again
local woken = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, 1000)
for _, group in ipairs(woken) do
  redis.call('ZREM', KEYS[5], group)
  local head = redis.call('ZRANGE', F.queue_prefix .. group, 0, 0, 'WITHSCORES')
  if head[2] then
    redis.call('ZADD', KEYS[4], head[2], group)
  end
end

local lead = tonumber(ARGV[11])
local P = {rates = KEYS[7], crawl_delay = KEYS[8], host_prefix = ARGV[6],
           delay_max = tonumber(ARGV[7]), tolerance = tonumber(ARGV[10]), lead = lead, bad = 0}
P.default_rate = number_field(P, redis.call('HGET', KEYS[7], '*')) or 0

local leased, leased_data = {}, {}
local taken = 0
-- rate-limited groups' requests: returned first, so they are sent first
local paced, paced_data, paced_at = {}, {}, {}
local watched = {}
local candidates = redis.call('ZRANGE', KEYS[4], 0, count - 1)
local share = math.ceil(count / math.max(#candidates, 1))
for pass = 1, 2 do
  for _, group in ipairs(candidates) do
    local want = math.min(share, count - #leased - #paced)
    if want <= 0 then break end
    local queue = F.queue_prefix .. group
    local interval, spacing, window, is_watched = host_pacing(P, group, now)
    if interval > 0 then
      -- a rate-limited group: at most ARGV[8] seconds' worth, then it waits
      want = math.min(want, math.max(1, math.floor(tonumber(ARGV[8]) * 1000 / spacing)))
    end
    local items = {}
    if redis.call('ZSCORE', KEYS[4], group) then
      items = redis.call('ZRANGE', queue, 0, want - 1)
    end
    if #items > 0 then
      redis.call('ZREMRANGEBYRANK', queue, 0, #items - 1)
      taken = taken + #items
      local counters = ARGV[6] .. group
      local total = redis.call('HINCRBY', counters, 'leased', #items)
      if is_watched then watched[#watched + 1] = group end
      observe(P, counters, now, total)
      -- a paced group's slots follow its last one, one each spacing; a slow
      -- group's (its window is strict) none sooner than the lead, so that the
      -- reply (after the writes of its flush) and the node's turn to send come
      -- before the slot, not after it. A fast group's window takes that in.
      local slot = 0
      if interval > 0 then
        local soonest = now
        if spacing > 2 * lead then soonest = now + lead end
        slot = math.max(soonest, number_field(P, redis.call('HGET', counters, 'next')) or 0)
      end
      local stored = #items > 0 and redis.call('HMGET', F.data_prefix .. group, unpack(items)) or {}
      local scored = {}
      for i, item in ipairs(items) do
        local member = group .. '\n' .. item
        local data = stored[i] or ''  -- missing: dead-lettered by the node
        scored[#scored + 1] = ARGV[2]
        scored[#scored + 1] = member
        if interval > 0 then
          paced[#paced + 1] = member
          paced_data[#paced_data + 1] = data
          paced_at[#paced_at + 1] = string.format('%.0f:%.0f', slot, window)
          slot = slot + spacing
        else
          leased[#leased + 1] = member
          leased_data[#leased_data + 1] = data
        end
      end
      redis.call('ZADD', KEYS[1], unpack(scored))  -- at most ARGV[1] requests
      local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
      if interval > 0 then
        local next_time = math.ceil(slot)
        redis.call('HSET', counters, 'next', next_time)
        redis.call('ZREM', KEYS[4], group)
        -- waits even when its queue is empty: a request found meanwhile waits too
        redis.call('ZADD', KEYS[5], next_time - lead, group)
      elseif head[2] then
        redis.call('ZADD', KEYS[4], head[2], group)
      else
        redis.call('ZREM', KEYS[4], group)
      end
    elseif pass == 1 then
      redis.call('ZREM', KEYS[4], group)  -- no work left (its queue emptied elsewhere)
    end
  end
  if #leased + #paced >= count or share >= count then break end
  share = count - #leased - #paced
end
for i, member in ipairs(leased) do
  paced[#paced + 1] = member
  paced_data[#paced_data + 1] = leased_data[i]
  paced_at[#paced_at + 1] = '0'
end
leased, leased_data = paced, paced_data
if taken > 0 then
  redis.call('HINCRBY', KEYS[6], 'queued', -taken)
end

if #leased == 0 then
  if redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', KEYS[5]) == 0 then
    -- no group holds work: a count left over (a queue deleted by hand) must not
    -- keep the crawl from ever being idle
    redis.call('HSET', KEYS[6], 'queued', 0)
  end
  local next_times = {}
  local waiting = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')[2]
  local delayed = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')[2]
  if waiting then next_times[#next_times + 1] = tonumber(waiting) end
  if delayed then next_times[#next_times + 1] = tonumber(delayed) end
  if #next_times == 0 then
    return {leased, leased_data, false, paced_at, watched, P.bad}
  end
  return {leased, leased_data, tostring(math.min(unpack(next_times))), paced_at, watched, P.bad}
end
redis.call('ZADD', KEYS[2], now, ARGV[3])
return {leased, leased_data, false, paced_at, watched, P.bad}
