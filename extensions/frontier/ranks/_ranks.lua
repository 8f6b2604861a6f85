--! include _hooks _entries _crawls
-- What a queue group's rank (NAME:hostrank, frontier/ranks/) decides: the
-- ranks part's piece, in the crawl's manifest when the crawl orders by
-- importance or budgets by rank (part.py), and in its own link_graph.

-- A group's rank, 0 when it has none or the key is not a sorted set (anyone may
-- write to Redis: a bad key ranks no one, and stops no lease nor enqueue).
local function rank_of(key, group)
  local rank = redis.pcall('ZSCORE', key, group)
  if type(rank) == 'table' then return 0 end
  return math.max(tonumber(rank or '0') or 0, 0)
end

-- The page budget of ``base`` (a group without its crawl and lane): with
-- HOST_BUDGET_BY_RANK (A.rank_key given: NAME:hostrank), floor + per_rank * rank, at most
-- ceiling, read once per script call; else the fixed HOST_PAGE_BUDGET.
fill('budget', function(F, A, base, fixed)
  if not A.rank_key then return fixed end
  F.budget_of = F.budget_of or {}
  local limit = F.budget_of[base]
  if not limit then
    local rank = rank_of(A.rank_key, base)
    limit = math.floor(math.min(tonumber(A.rank_ceiling),
                                tonumber(A.rank_floor) + tonumber(A.rank_per) * rank))
    F.budget_of[base] = limit
  end
  return limit
end)

-- FRONTIER_ORDER = "importance" (the frontier hash's 'order', ranks/part.py): a
-- group's place among its crawl's ready groups is its head's order less
-- RANK_STEPS priority steps per doubling of its rank, so hosts that more domains
-- link to take the lease turns first (each within its own politeness). Ranks
-- are read once per script call; a group's own queue keeps its order.
local RANK_STEPS = 10
local MOST_STEPS = 400  -- a rank of 2^40 (a hostile import's inf is no more)

local function by_importance(F)
  if F.importance == nil then
    F.importance = F.frontier ~= nil and redis.call('HGET', F.frontier, 'order') == 'importance'
  end
  return F.importance
end

local function rank_steps(rank)
  rank = tonumber(rank) or 0
  return math.min(math.floor(RANK_STEPS * math.log(1 + math.max(rank, 0)) / math.log(2)),
                  MOST_STEPS)
end

fill('ready_score', function(F, group, order)
  if not by_importance(F) then return order end
  local host = host_part(group)
  F.bonus = F.bonus or {}
  local steps = F.bonus[host]
  if not steps then
    steps = rank_steps(rank_of(crawl_base(F) .. 'hostrank', host))
    F.bonus[host] = steps
  end
  return order - steps * SEQ_SPAN
end)

-- A rank that rose moves its group (a queue group: HOST, HOST#CRAWL, its render
-- lane) ahead in its ready set by the steps it gained, if it is there: a host
-- waiting its turn would otherwise keep the place its first link gave it.
local function promote(F, group, before, after)
  if not by_importance(F) then return end
  local gained = rank_steps(after) - rank_steps(before)
  if gained <= 0 then return end
  local ready = ready_of(F, crawl_of(group), lane_of(group))
  local score = tonumber(redis.call('ZSCORE', ready, group))
  if score then redis.call('ZADD', ready, score - gained * SEQ_SPAN, group) end
end
