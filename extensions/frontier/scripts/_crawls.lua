-- Crawls under an id, render lanes and their budgets.

-- Crawls. A queue group is HOST, or HOST#CRAWL for a crawl started under an id
-- (scrapy seed --crawl ID): the host part keys what belongs to the host (its
-- politeness, holds, rates: shared by every crawl), the whole group what belongs
-- to the job (its queue, data and HOST_PAGE_BUDGET count). A crawl's keys sit
-- next to its groups' data (F.data_prefix is NAME:data:): NAME:crawls (crawl ->
-- state; absent = running; '*' = paused pauses every crawl), NAME:turns (crawls
-- with work ready -> how much they were given, by weight), NAME:crawl:ID (its
-- counters and settings), NAME:crawl:ID:ready (its groups ready: the crawl with
-- no id keeps NAME:ready) and NAME:crawl:ID:groups (every group it queued in).
-- (crawl_of and lane_of remember their answers for the script's run: a flush
-- names each group many times, and a pattern match costs more than a look-up)
local crawl_of_group, lane_of_group = {}, {}
local function crawl_of(group)
  local crawl = crawl_of_group[group]
  if not crawl then
    crawl = string.match(group, '#(%w[%w_.-]*)$') or ''
    crawl_of_group[group] = crawl
  end
  return crawl
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
  local lane = lane_of_group[group]
  if not lane then
    local job = job_part(group)
    lane = ''
    if #job > #RENDER_MARK and string.sub(job, -#RENDER_MARK) == RENDER_MARK then
      lane = 'render'
    end
    lane_of_group[group] = lane
  end
  return lane
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

-- how far behind the crawl furthest behind a crawl comes back into the turns at
-- most (requests per weight)
local TURN_CATCHUP = 10

-- the crawl hash's field keeping a crawl's turn while it has no group ready
local function turn_field(lane)
  if lane == 'render' then return 'turn:render' end
  return 'turn'
end

-- A running crawl with groups ready takes part in the turns of leasing (of its
-- lane: render groups take turns among themselves). It joins at its own turn,
-- kept when it left (a crawl whose groups wait for a host the other crawls'
-- groups share comes back as far behind as it was), but no further behind than
-- TURN_CATCHUP, so an idle spell earns it no more than a short burst.
local function take_turn(F, crawl, lane)
  F.turned = F.turned or {}
  if F.turned[lane .. '\n' .. crawl] then return end
  F.turned[lane .. '\n' .. crawl] = true
  if crawl_state(F, crawl) ~= 'running' then return end
  local turns = turns_of(F, lane)
  if redis.call('ZSCORE', turns, crawl) then return end
  local first = tonumber(redis.call('ZRANGE', turns, 0, 0, 'WITHSCORES')[2] or '')
  local own
  if crawl ~= '' then
    own = tonumber(redis.call('HGET', crawl_key(F, crawl), turn_field(lane)) or '')
    if own and (own ~= own or own == math.huge or own == -math.huge) then
      own = nil  -- not a turn this script wrote: the crawl joins as a new one
    end
  end
  local turn = first or own or 0
  if own and first and own < first then turn = math.max(own, first - TURN_CATCHUP) end
  redis.call('ZADD', turns, turn, crawl)
end

-- A crawl with no group ready leaves the turns, keeping its turn for its return.
local function leave_turns(F, crawl, lane)
  local turns = turns_of(F, lane)
  local turn = redis.call('ZSCORE', turns, crawl)
  if not turn then return end
  redis.call('ZREM', turns, crawl)
  if crawl ~= '' then redis.call('HSET', crawl_key(F, crawl), turn_field(lane), turn) end
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
