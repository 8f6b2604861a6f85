--! include _named _hooks _entries _crawls _queues _fields _pacing _lines _affinity
-- Lease requests to a node: from the crawls that take part in the turns, a share
-- each by weight (the one furthest behind first); within a crawl, from its groups
-- (hosts) that are ready, the best first, a fair share each. Politeness is
-- decided here, once per group, by its host's state: every crawl of a host
-- keeps the host's pace and holds.
-- Keys (by name, _named.lua):
--   leases       this node's leases (zset, GROUP\nID -> lease deadline in ms)
--   nodes        node registry (zset, score = last heartbeat in ms)
--   delayed      delayed retries (zset, GROUP\nJSON -> due time in ms)
--   ready        ready groups of the crawl without an id (zset, group -> order of
--                its first request; a crawl under an id has its own, _crawls.lua)
--   waiting      waiting groups (zset, group -> time it may be leased again, ms)
--   frontier     frontier counters (hash: queued)
--   rates        rates (hash: group or '*' -> requests per second)
--   crawl_delay  robots.txt Crawl-delay per group (hash, seconds)
--   lines        levels (domains, addresses) whose line of groups waits for their
--                next slot (zset, level key -> when one of them is woken, ms)
--   (each group's host hash, host_prefix .. GROUP: next, leased, arate, hold,
--   and the observed rate: orate, win, wl)
-- Arguments (by name):
--   count        how many requests at most
--   deadline     the lease deadline (ms since epoch)
--   node         this node's id
--   now          ms since epoch: leasing counts as a heartbeat, so a lease is
--                never held by a node the others cannot see
--   queue_prefix, host_prefix, data_prefix: the group queue, host state and
--                request data key prefixes
--   delay_max    the most seconds a Crawl-delay may ask for
--   burst_seconds  seconds of a rate-limited group's requests one lease may hand
--                out at once (at least one request)
--   tolerance    the fraction of a paced group's interval a send may be late by
--                (slots are spaced by the interval plus that)
--   lead         ms before its next slot a paced group may be leased, so its
--                request is at the node, waiting for its slot, when the slot comes
--   render_count how many render requests at most (render groups, HOST!render):
--                0 on a node that cannot render, which never leases one
--   domain_prefix, ip_prefix: the key prefixes of the registered domains' and
--                the addresses' pacing (CLUSTER_DOMAIN_RATE, CLUSTER_IP_RATE:
--                NAME:rates '*domain' and '*ip'; _pacing.lua host_levels)
--   levels_apart '1' for a sharded frontier: the levels are in another slot, so
--                a host goes at its levels' pace, their slots claimed by the
--                node (claim_levels.lua); no line here
--   affinity     ms other nodes leave a ready unpaced host to the node that leased it
--                last (its warm connection and TLS session are there):
--                FRONTIER_HOST_AFFINITY; 0 = off (_affinity.lua)
--   alive_after  heartbeats older than this (ms) mean the node is dead: a dead
--                node's hosts are anyone's
-- Returns, by name: leases (GROUP\nID, rate-limited groups first), data (their
-- JSON in the same order, '' for a missing one), next_due (the time, ms, the
-- next waiting group or delayed retry is due, or false: an idle node sleeps
-- until then at most), slots (each lease's send slot 'SLOT:WINDOW': ms since
-- epoch, and ms it may be sent after it; '0': unpaced, send at once), watched
-- (the groups among those leased that pushed back: their good answers are
-- reported), bad (how many malformed host fields were ignored), describe (hosts
-- a level rate needs to know more of: their registered domain and address, which
-- the node writes into their host hash; they wait DESCRIBE_WAIT_MS meanwhile),
-- unresolvable (group, why, ...: groups leased whose host has no address, for
-- the node to dead-letter, not fetch), levels (with levels_apart: each lease's
-- 'DOMAIN ADDRESS HOST_INTERVAL_MS' for claim_levels.lua, '' for none),
-- affinity (ready groups passed over as other nodes', requests of their hosts
-- taken over for want of other work)
local K, A = named_input(true)
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready, waiting = K.waiting,
           frontier = K.frontier, added = {}}
local count = tonumber(A.count)
local render_count = tonumber(A.render_count or '0') or 0
local now = tonumber(A.now)
local MAX_CRAWLS = 16  -- crawls one lease looks at: the 16 furthest behind
local DESCRIBE_WAIT_MS = 500  -- a host being described is looked at again after this

local lead = tonumber(A.lead)
local P = {rates = K.rates, crawl_delay = K.crawl_delay, host_prefix = A.host_prefix,
           delay_max = tonumber(A.delay_max), tolerance = tonumber(A.tolerance), lead = lead, bad = 0}
P.default_rate = number_field(P, redis.call('HGET', K.rates, '*')) or 0
P.domain_prefix, P.ip_prefix = A.domain_prefix, A.ip_prefix
P.apart = A.levels_apart == '1'
read_level_rates(P, K.rates)
local describe, described = {}, {}
local unresolvable = {}  -- group, why, ...: hosts with no address (their leases are dead-lettered)

-- retries whose backoff has passed go back to their group's queue
local due = redis.call('ZRANGEBYSCORE', K.delayed, '-inf', now, 'LIMIT', 0, 500)
local due_ids = #due > 0 and new_ids(F, #due) or {}
local unparked = {}
for i, member in ipairs(due) do
  redis.call('ZREM', K.delayed, member)
  local group, item = split_item(member)
  push(F, group, priority_score(item), due_ids[i], item)
  local crawl = crawl_of(group)
  unparked[crawl] = (unparked[crawl] or 0) + 1
end
for crawl, n in pairs(unparked) do count_crawl(F, crawl, 'delayed', -n) end
settle(F)

-- groups whose politeness wait is over become ready again (a stopped crawl's
-- have nothing left: stopping emptied their queues)
local woken = redis.call('ZRANGEBYSCORE', K.waiting, '-inf', now, 'LIMIT', 0, 1000)
for _, group in ipairs(woken) do
  redis.call('ZREM', K.waiting, group)
  local crawl = crawl_of(group)
  local head = redis.call('ZRANGE', F.queue_prefix .. group, 0, 0, 'WITHSCORES')
  if head[2] and not has_ended(F, crawl) then
    local lane = lane_of(group)
    redis.call('ZADD', ready_of(F, crawl, lane), ready_score(F, group, head[2]), group)
    take_turn(F, crawl, lane)
  end
end
-- levels whose next slot comes: the first group of each line that still has
-- work is ready again (_lines.lua); with the levels' rates lifted, every line
local W = {lines = K.lines, waiting = K.waiting, now = now, lead = lead}
for _, key in ipairs(redis.call('ZRANGEBYSCORE', K.lines, '-inf', now, 'LIMIT', 0, 1000)) do
  wake_line(F, P, W, key)
end

for _, lane in ipairs({'', 'render'}) do
  if redis.call('ZCARD', ready_of(F, '', lane)) > 0 then
    take_turn(F, '', lane)  -- a crawl begun before crawl ids takes part as it is
  end
end

local H = affinity_of(A, K, now)  -- host affinity (_affinity.lua)

local leased, leased_data = {}, {}
local taken = 0
-- rate-limited groups' requests: returned first, so they are sent first
local paced, paced_data, paced_at = {}, {}, {}
-- levels apart: each lease's 'DOMAIN ADDRESS HOST_INTERVAL' for the claim
local leased_claims, paced_claims = {}, {}
local watched = {}

-- Lease up to want_total requests from candidates, groups in ready (one
-- crawl's), a fair share each; how many.
local function lease_from(ready, candidates, want_total, lane)
  local got = 0
  local share = math.ceil(want_total / math.max(#candidates, 1))
  for pass = 1, 2 do
    for _, group in ipairs(candidates) do
      local want = math.min(share, want_total - got)
      if want <= 0 then break end
      local queue = F.queue_prefix .. group
      local host = host_part(group)
      local interval, spacing, window, is_watched, hold, next_slot = host_pacing(P, host, now)
      local host_interval = interval
      local items = {}
      local levels, in_line, dead_reason
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
        local why, held_until
        levels, why, held_until = host_levels(P, host, now)
        if why == 'unresolvable' then
          -- nothing to pace: its requests go to be dead-lettered with the reason
          interval, dead_reason = 0, held_until
        elseif not levels then
          if why == 'hold' then
            wait_until = math.max(wait_until, held_until)
          else
            if not described[host] then
              described[host] = true
              describe[#describe + 1] = host
            end
            wait_until = math.max(wait_until, now + DESCRIBE_WAIT_MS)
          end
        elseif wait_until == 0 and not P.apart then
          in_line = line_up(P, W, levels, group, ready)
        end
        if levels then
          -- the host goes at the pace of the slowest of its levels, each send
          -- slot after every level's next; a late send stays within all windows
          for _, L in ipairs(levels) do
            if interval <= 0 then window = L.window else window = math.min(window, L.window) end
            interval = math.max(interval, L.interval)
            spacing = math.max(spacing, L.spacing)
            next_slot = math.max(next_slot or 0, L.next)
          end
        end
        if wait_until > 0 then
          redis.call('ZREM', ready, group)
          redis.call('ZADD', K.waiting, math.ceil(wait_until), group)
        elseif not in_line then
          if interval > 0 then
            -- a rate-limited group: at most A.burst_seconds seconds' worth, then it waits
            want = math.min(want, math.max(1, math.floor(tonumber(A.burst_seconds) * 1000 / spacing)))
          end
          items = redis.call('ZRANGE', queue, 0, want - 1)
        end
      end
      if #items > 0 then
        redis.call('ZREMRANGEBYRANK', queue, 0, #items - 1)
        call_each('taken', F, group)
        got = got + #items
        taken = taken + #items
        local counters = A.host_prefix .. host
        local total = redis.call('HINCRBY', counters, 'leased', #items)
        if is_watched then watched[#watched + 1] = group end
        if dead_reason then
          unresolvable[#unresolvable + 1] = group
          unresolvable[#unresolvable + 1] = dead_reason
        end
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
        local claim = claim_of(P, levels, host_interval)
        local scored = {}
        for i, item in ipairs(items) do
          local member = group .. '\n' .. item
          local data = stored[i] or ''  -- missing: dead-lettered by the node
          scored[#scored + 1] = A.deadline
          scored[#scored + 1] = member
          if interval > 0 then
            paced[#paced + 1] = member
            paced_data[#paced_data + 1] = data
            paced_at[#paced_at + 1] = string.format('%.0f:%.0f', slot, window)
            paced_claims[#paced_claims + 1] = claim
            slot = slot + spacing
          else
            leased[#leased + 1] = member
            leased_data[#leased_data + 1] = data
            leased_claims[#leased_claims + 1] = claim
          end
        end
        redis.call('ZADD', K.leases, unpack(scored))  -- at most A.count requests
        local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
        if interval > 0 then
          local next_time = math.ceil(slot)
          redis.call('HSET', counters, 'next', next_time)
          for _, L in ipairs(P.apart and {} or levels) do
            L.next = slot - spacing + L.spacing  -- the last slot given, then its own spacing
            save_level(L, now)
            if L.turn == group then redis.call('HDEL', L.key, 'turn') end
          end
          redis.call('ZREM', ready, group)
          -- waits even when its queue is empty: a request found meanwhile waits too
          redis.call('ZADD', K.waiting, next_time - lead, group)
        else
          claim_host(H, counters, lane)  -- unpaced only: a paced host is idle nodes' anyway
          if head[2] then
            redis.call('ZADD', ready, ready_score(F, group, head[2]), group)
          else
            redis.call('ZREM', ready, group)
          end
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

-- Lease up to want_total requests from the groups in ready (one crawl's, in
-- lane); how many.
local function lease_groups(ready, want_total, lane)
  return lease_from(ready, candidates_of(H, P, ready, want_total, lane), want_total, lane)
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
        local got = lease_groups(ready_of(F, crawl, lane), want, lane)
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
      leave_turns(F, crawl, lane)  -- back when a group of it is ready again
    end
  end
  return lane_got
end

local render_taken = 0
if render_count > 0 then render_taken = lease_lane('render', render_count) end
if lease_lane('', count) == 0 and H.left > 0 then
  -- nothing but other nodes' hosts: theirs rather than an idle node
  H.steal = true
  H.taken_over = lease_lane('', count)
end

for i, member in ipairs(leased) do
  paced[#paced + 1] = member
  paced_data[#paced_data + 1] = leased_data[i]
  paced_at[#paced_at + 1] = '0'
  paced_claims[#paced_claims + 1] = leased_claims[i]
end
leased, leased_data = paced, paced_data
if taken > 0 then
  redis.call('HINCRBY', K.frontier, 'queued', -taken)
end
if render_taken > 0 then
  redis.call('HINCRBY', K.frontier, 'render_queued', -render_taken)
end

if #leased == 0 then
  if redis.call('ZCARD', K.ready) + redis.call('ZCARD', ready_of(F, '', 'render'))
      + redis.call('ZCARD', K.waiting) + redis.call('ZCARD', K.lines) == 0
      and redis.call('EXISTS', crawl_base(F) .. 'crawls') == 0
      and tonumber(redis.call('HGET', K.frontier, 'spilled') or '0') <= 0 then
    -- no group holds work: a count left over (a queue deleted by hand) must not
    -- keep the crawl from ever being idle (crawls under an id count their own)
    redis.call('HSET', K.frontier, 'queued', 0, 'render_queued', 0)
  end
  local next_times = {}
  local waiting = redis.call('ZRANGE', K.waiting, 0, 0, 'WITHSCORES')[2]
  local delayed = redis.call('ZRANGE', K.delayed, 0, 0, 'WITHSCORES')[2]
  local line = redis.call('ZRANGE', K.lines, 0, 0, 'WITHSCORES')[2]
  if waiting then next_times[#next_times + 1] = tonumber(waiting) end
  if line then next_times[#next_times + 1] = tonumber(line) end
  if delayed then next_times[#next_times + 1] = tonumber(delayed) end
  if #next_times == 0 then
    return {'leases', leased, 'data', leased_data, 'next_due', false, 'slots', paced_at,
            'watched', watched, 'bad', P.bad, 'describe', describe, 'unresolvable', unresolvable,
            'levels', paced_claims, 'affinity', {H.left, H.taken_over}}
  end
  local next_due = tostring(math.min(unpack(next_times)))
  return {'leases', leased, 'data', leased_data, 'next_due', next_due, 'slots', paced_at,
          'watched', watched, 'bad', P.bad, 'describe', describe, 'unresolvable', unresolvable,
            'levels', paced_claims, 'affinity', {H.left, H.taken_over}}
end
redis.call('ZADD', K.nodes, now, A.node)
return {'leases', leased, 'data', leased_data, 'next_due', false, 'slots', paced_at,
        'watched', watched, 'bad', P.bad, 'describe', describe, 'unresolvable', unresolvable,
            'levels', paced_claims, 'affinity', {H.left, H.taken_over}}
