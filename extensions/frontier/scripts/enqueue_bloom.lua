--! include _named _hooks _entries _crawls _queues
-- Add requests to their groups' queues unless the Bloom filter has seen them.
-- Keys (by name, _named.lua): bloom_count (count of fingerprints added to the
-- filter, a string); ready, waiting (groups, zsets); frontier (counters: queued,
-- seq).
-- Arguments: queue_prefix, host_prefix, data_prefix (group queue, counters and
-- request data key prefixes); budget (HOST_PAGE_BUDGET, 0 = no limit;
-- or by rank, as enqueue.lua);
-- bloom_prefix (shard N is prefix .. N); k (the bit positions per fingerprint).
-- Items: k + 4 per request: shard ('' = dont_filter: no check), k offsets,
-- group, priority, request JSON (empty JSON only records the fingerprint).
-- Returns, by name: new, over_budget, over_crawl_budget (as enqueue.lua)
local K, A, L = named_input()
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready,
           waiting = K.waiting, frontier = K.frontier, added = {}}
local budget = tonumber(A.budget)
local k = tonumber(A.k)
local stride = k + 4
local count = #L / stride
local seq_base = nil  -- taken on the first request queued: a bare check takes none
local seq = 0
local added, over, crawl_over = 0, {}, 0
local i = 1
while i + stride - 1 <= #L do
  seq = seq + 1
  local shard = L[i]
  local new = true
  if shard ~= '' then
    -- all k bits in one command: what the AOF and replicas receive per URL is
    -- one BITFIELD, not k SETBITs
    local ops = {}
    for j = 1, k do
      ops[#ops + 1] = 'SET'
      ops[#ops + 1] = 'u1'
      ops[#ops + 1] = L[i + j]
      ops[#ops + 1] = 1
    end
    new = false
    for _, old in ipairs(redis.call('BITFIELD', A.bloom_prefix .. shard, unpack(ops))) do
      if old == 0 then
        new = true
      end
    end
    if new then
      redis.call('INCR', K.bloom_count)
    end
  end
  if new then
    added = added + 1
    local group, item = L[i + k + 1], L[i + k + 3]
    if item ~= '' then
      local base = budget_group(group)
      local counters = A.host_prefix .. base
      local limit = group_budget(F, A, base, budget)
      if limit > 0 and redis.call('HINCRBY', counters, 'accepted', 1) > limit then
        redis.call('HINCRBY', counters, 'dropped:budget', 1)
        over[#over + 1] = group
      elseif over_crawl_budget(F, group) then
        crawl_over = crawl_over + 1
      else
        seq_base = seq_base or redis.call('HINCRBY', K.frontier, 'seq', count) - count
        local id = seq_base + seq
        push(F, group, order_score(tonumber(L[i + k + 2]), id), string.format('%d', id), item)
      end
    end
  end
  i = i + stride
end
settle(F)
return {'new', added, 'over_budget', over, 'over_crawl_budget', crawl_over}
