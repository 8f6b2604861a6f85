--! include _named _hooks _entries _crawls _queues _dupefilter
-- Add requests to their groups' queues unless their fingerprint was seen before.
-- Keys (by name, _named.lua): dupefilter (hash: field 'n' counts the
-- fingerprints); ready, waiting (groups, zsets); frontier (counters: queued, seq).
-- Arguments: queue_prefix, host_prefix, data_prefix (group queue, counters and
-- request data key prefixes: each queued request's JSON by id); budget
-- (HOST_PAGE_BUDGET: requests a group may ever be given, 0 = no limit; with
-- HOST_BUDGET_BY_RANK, rank_key (NAME:hostrank), rank_floor, rank_per and
-- rank_ceiling instead: ranks/_ranks.lua);
-- level_prefix (the fingerprints live in small hashes prefix .. LEVEL .. ':' ..
-- BUCKET, one field of 7 bytes each).
-- Items: four per request: its 14-byte fingerprint, group, priority and JSON; an
-- empty fingerprint skips the seen check (dont_filter), empty JSON only records
-- the fingerprint (a standalone dupefilter check).
-- Returns, by name: new (fingerprints new: requests added or over budget),
-- over_budget (the group of each request dropped over budget), over_crawl_budget
-- (requests dropped over their crawl's budget)
--
-- Why levels: each new fingerprint is one small HSETNX, so what Redis writes to its
-- AOF and replicas per URL stays the same however many URLs were seen. A bucket
-- stays a compact listpack of at most ~128 fields (~12 bytes per URL); a check
-- looks in every level so far: one more HEXISTS each time the filter grows 4x.
-- (level_for, bucket_key and fingerprint_field come from _dupefilter.lua)
local K, A, L = named_input()
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready,
           waiting = K.waiting, frontier = K.frontier, added = {}}
local budget = tonumber(A.budget)
local level_prefix = A.level_prefix
local count = #L / 4
local seq_base = nil  -- taken on the first request queued: a bare check takes none
local seq = 0
local added, over, crawl_over = 0, {}, 0

local top = level_for(tonumber(redis.call('HGET', K.dupefilter, 'n') or '0'))

-- whether fp was seen before, recording it if not: the full levels are looked in,
-- the top one written to at once (HSETNX: one call for the check and the write)
local function seen_before(fp)
  local field = fingerprint_field(fp)
  for level = 0, top - 1 do
    if redis.call('HEXISTS', bucket_key(level_prefix, fp, level), field) == 1 then return true end
  end
  return redis.call('HSETNX', bucket_key(level_prefix, fp, top), field, '') == 0
end

local new_fingerprints = 0
for i = 1, #L - 3, 4 do
  seq = seq + 1
  local fp = L[i]
  local new = true
  if fp ~= '' then
    if seen_before(fp) then
      new = false
    else
      new_fingerprints = new_fingerprints + 1
    end
  end
  if new then
    added = added + 1
    local item = L[i + 3]
    if item ~= '' then
      local group = L[i + 1]
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
        push(F, group, order_score(tonumber(L[i + 2]), id), string.format('%d', id), item)
      end
    end
  end
end
if new_fingerprints > 0 then
  redis.call('HINCRBY', K.dupefilter, 'n', new_fingerprints)
end
settle(F)
return {'new', added, 'over_budget', over, 'over_crawl_budget', crawl_over}
