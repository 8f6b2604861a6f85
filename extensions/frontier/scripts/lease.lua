--! include _entries _crawls _queues _pacing
-- Lease requests to a node: from the crawls that take part in the turns, a share
-- each by weight (the one furthest behind first); within a crawl, from its groups
-- (hosts) that are ready, the best first, a fair share each. Politeness is
-- decided here, once per group, by its host's state: every crawl of a host
-- keeps the host's pace and holds.
-- KEYS[1]  this node's leases (zset, GROUP\nID -> lease deadline in ms)
-- KEYS[2]  node registry (zset, score = last heartbeat in ms)
-- KEYS[3]  delayed retries (zset, GROUP\nJSON -> due time in ms)
-- KEYS[4]  ready groups of the crawl without an id (zset, group -> order of its
--          first request; a crawl under an id has its own, _crawls.lua)
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
-- ARGV[12] how many render requests at most (render groups, HOST!render): 0 on a
--          node that cannot render, which never leases one
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
local render_count = tonumber(ARGV[12] or '0') or 0
local now = tonumber(ARGV[4])
local MAX_CRAWLS = 16  -- crawls one lease looks at: the 16 furthest behind

-- retries whose backoff has passed go back to their group's queue
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 500)
local due_ids = #due > 0 and new_ids(F, #due) or {}
local unparked = {}
for i, member in ipairs(due) do
  redis.call('ZREM', KEYS[3], member)
  local group, item = split_item(member)
  push(F, group, priority_score(item), due_ids[i], item)
  local crawl = crawl_of(group)
  unparked[crawl] = (unparked[crawl] or 0) + 1
end
for crawl, n in pairs(unparked) do count_crawl(F, crawl, 'delayed', -n) end
settle(F)

-- groups whose politeness wait is over become ready again (a stopped crawl's
-- have nothing left: stopping emptied their queues)
local woken = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, 1000)
for _, group in ipairs(woken) do
  redis.call('ZREM', KEYS[5], group)
  local crawl = crawl_of(group)
  local head = redis.call('ZRANGE', F.queue_prefix .. group, 0, 0, 'WITHSCORES')
  if head[2] and not has_ended(F, crawl) then
    local lane = lane_of(group)
    redis.call('ZADD', ready_of(F, crawl, lane), head[2], group)
    take_turn(F, crawl, lane)
  end
end
for _, lane in ipairs({'', 'render'}) do
  if redis.call('ZCARD', ready_of(F, '', lane)) > 0 then
    take_turn(F, '', lane)  -- a crawl begun before crawl ids takes part as it is
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

-- Lease up to want requests from the groups in ready (one crawl's); how many.
local function lease_groups(ready, want_total)
  local got = 0
  local candidates = redis.call('ZRANGE', ready, 0, want_total - 1)
  local share = math.ceil(want_total / math.max(#candidates, 1))
  for pass = 1, 2 do
    for _, group in ipairs(candidates) do
      local want = math.min(share, want_total - got)
      if want <= 0 then break end
      local queue = F.queue_prefix .. group
      local host = host_part(group)
      local interval, spacing, window, is_watched, hold, next_slot = host_pacing(P, host, now)
      local items = {}
      if redis.call('ZSCORE', ready, group) then
        -- a crawl's group of a host whose other groups (the other crawls') took
        -- its next slot, or that is held: it waits for the host (a host's own
        -- group is moved to the waiting groups when that happens)
        local wait_until = 0
        if group ~= host then
          if hold > now then
            wait_until = hold
          elseif interval > 0 and next_slot and next_slot - lead > now then
            wait_until = next_slot - lead
          end
        end
        if wait_until > 0 then
          redis.call('ZREM', ready, group)
          redis.call('ZADD', KEYS[5], math.ceil(wait_until), group)
        else
          if interval > 0 then
            -- a rate-limited group: at most ARGV[8] seconds' worth, then it waits
            want = math.min(want, math.max(1, math.floor(tonumber(ARGV[8]) * 1000 / spacing)))
          end
          items = redis.call('ZRANGE', queue, 0, want - 1)
        end
      end
      if #items > 0 then
        redis.call('ZREMRANGEBYRANK', queue, 0, #items - 1)
        want_refill(F, group)
        got = got + #items
        taken = taken + #items
        local counters = ARGV[6] .. host
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
          slot = math.max(soonest, next_slot or 0)
        end
        local stored = redis.call('HMGET', F.data_prefix .. group, unpack(items))
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
          redis.call('ZREM', ready, group)
          -- waits even when its queue is empty: a request found meanwhile waits too
          redis.call('ZADD', KEYS[5], next_time - lead, group)
        elseif head[2] then
          redis.call('ZADD', ready, head[2], group)
        else
          redis.call('ZREM', ready, group)
        end
      elseif pass == 1 and #redis.call('ZRANGE', queue, 0, 0) == 0 then
        redis.call('ZREM', ready, group)  -- no work left (its queue emptied elsewhere)
      end
    end
    if got >= want_total or share >= want_total then break end
    share = want_total - got
  end
  return got
end

-- the crawls' turns, in one lane: each running crawl with ready groups, the
-- least served (for its weight) first; a crawl's share of this lease follows its
-- weight. Returns how many requests the lane gave.
local function lease_lane(lane, lane_count)
  local turns = turns_of(F, lane)
  local in_turns = redis.call('ZRANGE', turns, 0, MAX_CRAWLS - 1)
  local crawls, weights, total_weight = {}, {}, 0
  for _, crawl in ipairs(in_turns) do
    if crawl_state(F, crawl) == 'running' then
      local weight = 1
      if crawl ~= '' then
        weight = number_field(P, redis.call('HGET', crawl_key(F, crawl), 'weight')) or 1
        if weight <= 0 then weight = 1 end
      end
      crawls[#crawls + 1] = crawl
      weights[crawl] = weight
      total_weight = total_weight + weight
    else
      redis.call('ZREM', turns, crawl)  -- paused or ended since it joined
    end
  end
  local given, short, lane_got = {}, {}, 0
  for pass = 1, 2 do
    for _, crawl in ipairs(crawls) do
      local left = lane_count - lane_got
      if left <= 0 then break end
      local want = left
      if pass == 1 then
        want = math.min(left, math.max(1, math.floor(lane_count * weights[crawl] / total_weight + 0.5)))
      end
      if pass == 1 or not short[crawl] then
        local got = lease_groups(ready_of(F, crawl, lane), want)
        given[crawl] = (given[crawl] or 0) + got
        lane_got = lane_got + got
        short[crawl] = got < want
      end
    end
    if lane_got >= lane_count or #crawls <= 1 then break end
  end
  for _, crawl in ipairs(crawls) do
    local got = given[crawl] or 0
    if got > 0 then
      count_crawl(F, crawl, 'queued', -got)
      count_crawl(F, crawl, 'in_flight', got)
      if #crawls > 1 then
        redis.call('ZINCRBY', turns, got / weights[crawl], crawl)
      end
    end
    if redis.call('ZCARD', ready_of(F, crawl, lane)) == 0 then
      redis.call('ZREM', turns, crawl)  -- back when a group of it is ready again
    end
  end
  return lane_got
end

local render_taken = 0
if render_count > 0 then render_taken = lease_lane('render', render_count) end
lease_lane('', count)

for i, member in ipairs(leased) do
  paced[#paced + 1] = member
  paced_data[#paced_data + 1] = leased_data[i]
  paced_at[#paced_at + 1] = '0'
end
leased, leased_data = paced, paced_data
if taken > 0 then
  redis.call('HINCRBY', KEYS[6], 'queued', -taken)
end
if render_taken > 0 then
  redis.call('HINCRBY', KEYS[6], 'render_queued', -render_taken)
end

if #leased == 0 then
  if redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', ready_of(F, '', 'render'))
      + redis.call('ZCARD', KEYS[5]) == 0
      and redis.call('EXISTS', crawl_base(F) .. 'crawls') == 0
      and tonumber(redis.call('HGET', KEYS[6], 'spilled') or '0') <= 0 then
    -- no group holds work: a count left over (a queue deleted by hand) must not
    -- keep the crawl from ever being idle (crawls under an id count their own)
    redis.call('HSET', KEYS[6], 'queued', 0, 'render_queued', 0)
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
