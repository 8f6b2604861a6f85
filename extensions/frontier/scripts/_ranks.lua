--! include _entries _crawls
-- What a queue group's rank (NAME:hostrank, frontier/ranks/) decides.

-- The page budget of ``base`` (a group without its crawl and lane): with
-- HOST_BUDGET_BY_RANK (A.rank_key given: NAME:hostrank), floor + per_rank * rank, at most
-- ceiling, read once per script call; else the fixed HOST_PAGE_BUDGET.
local function group_budget(F, A, base, fixed)
  if not A.rank_key then return fixed end
  F.budget_of = F.budget_of or {}
  local limit = F.budget_of[base]
  if not limit then
    local rank = tonumber(redis.call('ZSCORE', A.rank_key, base) or '0') or 0
    if rank < 0 then rank = 0 end
    limit = math.floor(math.min(tonumber(A.rank_ceiling),
                                tonumber(A.rank_floor) + tonumber(A.rank_per) * rank))
    F.budget_of[base] = limit
  end
  return limit
end

-- FRONTIER_ORDER = "importance" (the frontier hash's 'order', ranks/part.py): a
-- group's place among its crawl's ready groups is its head's order less
-- RANK_STEPS priority steps per doubling of its rank, so hosts that more domains
-- link to take the lease turns first (each within its own politeness). Ranks
-- are read once per script call; a group's own queue keeps its order.
local RANK_STEPS = 10
local MOST_STEPS = 400  -- a rank of 2^40 (a hostile import's inf is no more)
local function ready_score(F, group, order)
  if F.importance == nil then
    F.importance = F.frontier ~= nil and redis.call('HGET', F.frontier, 'order') == 'importance'
  end
  order = tonumber(order)
  if not F.importance then return order end
  local host = host_part(group)
  F.bonus = F.bonus or {}
  local steps = F.bonus[host]
  if not steps then
    local rank = tonumber(redis.call('ZSCORE', crawl_base(F) .. 'hostrank', host) or '0') or 0
    steps = math.min(math.floor(RANK_STEPS * math.log(1 + math.max(rank, 0)) / math.log(2)),
                     MOST_STEPS)
    F.bonus[host] = steps
  end
  return order - steps * SEQ_SPAN
end
