--! include _hooks _crawls _pacing
-- The lines of the levels above hosts (_pacing.lua host_levels): a group that
-- finds its registered domain or its address busy waits in that level's line,
-- and the level wakes one group a slot, so a level with thousands of hosts
-- costs a lease what one costs, and its hosts take its slots in turn.
-- W: {lines (the zset of levels with a line -> when one is woken, ms), waiting
-- (the waiting groups), now, lead (ms before its slot a group may be leased)}.

local LINE_POPS = 10  -- groups a wake looks at, at most (ones whose work went are dropped)
local LINE_RELEASE = 1000  -- groups a lifted level gives back per lease

-- Wake the first group of level ``key``'s line that still has work: it is made
-- the first of its crawl's ready groups, so the lease that follows looks at it
-- while its turn lasts (it goes back to its own order once leased), and named
-- the level's 'turn': no group outside the line takes that slot. A level whose
-- rate was lifted (set to 0) gives its whole line back, in its groups' order.
local function wake_line(F, P, W, key)
  local rate = level_rate(P, key)
  local L, pops = nil, LINE_POPS
  if rate > 0 then
    L = pacing_level(P, key, rate, W.now)
    if L.next - W.lead > W.now then  -- a slot was taken since: wait for the next
      redis.call('ZADD', W.lines, math.ceil(L.next - W.lead), key)
      return
    end
  else
    pops = LINE_RELEASE
  end
  local line = key .. ':line'
  for _ = 1, pops do
    local first = redis.call('ZPOPMIN', line)
    if #first == 0 then break end
    local group = first[1]
    local crawl = crawl_of(group)
    -- (a group held meanwhile waits for its hold in the waiting groups)
    if not redis.call('ZSCORE', W.waiting, group) and not has_ended(F, crawl) then
      local head = redis.call('ZRANGE', F.queue_prefix .. group, 0, 0, 'WITHSCORES')
      if head[2] then
        local lane = lane_of(group)
        local ready = ready_of(F, crawl, lane)
        local order = tonumber(head[2])
        take_turn(F, crawl, lane)
        if not L then
          redis.call('ZADD', ready, ready_score(F, group, order), group)
        else
          local best = tonumber(redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')[2] or order)
          redis.call('ZADD', ready, math.min(order, best - 1), group)
          redis.call('HSET', key, 'turn', group)
          break
        end
      end
    end
  end
  if redis.call('EXISTS', line) == 0 then
    redis.call('ZREM', W.lines, key)
  elseif L then
    redis.call('ZADD', W.lines, math.ceil(math.max(L.next, W.now) + L.spacing - W.lead), key)
  end
end

-- Whether ``group`` (in ``ready``) joins a line: when one of its levels gave its
-- next slot to another host, or has a line and the group holds no turn at any
-- level, it joins the line of the busiest (keeping its place if it is in it
-- already). A group with a turn takes a slot a little ahead instead (within a
-- spacing of the level that holds it back): a host held by two levels would
-- otherwise go from line to line. A turn it leaves unused goes on at once.
local function line_up(P, W, levels, group, ready)
  local has_turn, horizon = false, W.lead
  for _, L in ipairs(levels) do
    if L.turn == group then has_turn = true end
  end
  if has_turn then
    for _, L in ipairs(levels) do horizon = math.max(horizon, W.lead + L.spacing) end
  end
  local busy
  for _, L in ipairs(levels) do
    local blocked = L.next - W.now > horizon
        or (not has_turn and redis.call('EXISTS', L.key .. ':line') == 1)
    if blocked and (not busy or L.next > busy.next) then busy = L end
  end
  if not busy then return false end
  redis.call('ZADD', busy.key .. ':line', 'NX', W.now, group)
  redis.call('ZADD', W.lines, 'NX', math.ceil(busy.next - W.lead), busy.key)
  redis.call('ZREM', ready, group)
  for _, L in ipairs(levels) do
    if L.turn == group and L ~= busy then
      redis.call('HDEL', L.key, 'turn')
      redis.call('ZADD', W.lines, math.ceil(math.max(L.next - W.lead, W.now)), L.key)
    end
  end
  return true
end
