--! include _entries _crawls _queues
-- Add requests to their groups' queues unless the Bloom filter has seen them.
-- KEYS[1]  count of fingerprints added to the filter (string)
-- KEYS[2]  ready groups (zset)      KEYS[3]  waiting groups (zset)
-- KEYS[4]  frontier counters (hash: queued, seq)
-- ARGV[1]  group queue key prefix   ARGV[2]  group counters key prefix
-- ARGV[3]  HOST_PAGE_BUDGET (0 = no limit)
-- ARGV[4]  shard key prefix; shard N is prefix .. N
-- ARGV[5]  k, the bit positions per fingerprint
-- ARGV[6]  group data key prefix: each queued request's JSON by id
-- ARGV...  per request from ARGV[7]: shard ('' = dont_filter: no check), k
--          offsets, group, priority, request JSON (empty JSON only records the
--          fingerprint)
-- Returns  {new fingerprints (requests added or over budget), the group of each
--          request dropped over budget, requests dropped over their crawl's budget}
local F = {queue_prefix = ARGV[1], data_prefix = ARGV[6], ready = KEYS[2], waiting = KEYS[3],
           frontier = KEYS[4], added = {}}
local budget = tonumber(ARGV[3])
local k = tonumber(ARGV[5])
local stride = k + 4
local count = (#ARGV - 6) / stride
local seq_base = nil  -- taken on the first request queued: a bare check takes none
local seq = 0
local added, over, crawl_over = 0, {}, 0
local i = 7
while i <= #ARGV do
  seq = seq + 1
  local shard = ARGV[i]
  local new = true
  if shard ~= '' then
    -- all k bits in one command: what the AOF and replicas receive per URL is
    -- one BITFIELD, not k SETBITs
    local ops = {}
    for j = 1, k do
      ops[#ops + 1] = 'SET'
      ops[#ops + 1] = 'u1'
      ops[#ops + 1] = ARGV[i + j]
      ops[#ops + 1] = 1
    end
    new = false
    for _, old in ipairs(redis.call('BITFIELD', ARGV[4] .. shard, unpack(ops))) do
      if old == 0 then
        new = true
      end
    end
    if new then
      redis.call('INCR', KEYS[1])
    end
  end
  if new then
    added = added + 1
    local group, item = ARGV[i + k + 1], ARGV[i + k + 3]
    if item ~= '' then
      if budget > 0 and redis.call('HINCRBY', ARGV[2] .. budget_group(group), 'accepted', 1) > budget then
        redis.call('HINCRBY', ARGV[2] .. budget_group(group), 'dropped:budget', 1)
        over[#over + 1] = group
      elseif over_crawl_budget(F, group) then
        crawl_over = crawl_over + 1
      else
        seq_base = seq_base or redis.call('HINCRBY', KEYS[4], 'seq', count) - count
        local id = seq_base + seq
        push(F, group, order_score(tonumber(ARGV[i + k + 2]), id), string.format('%.0f', id), item)
      end
    end
  end
  i = i + stride
end
settle(F)
return {added, over, crawl_over}
