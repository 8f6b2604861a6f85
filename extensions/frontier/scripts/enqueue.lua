--! include _entries _crawls _queues _dupefilter
-- Add requests to their groups' queues unless their fingerprint was seen before.
-- KEYS[1]  dupefilter (hash): field 'n' counts the fingerprints
-- KEYS[2]  ready groups (zset)      KEYS[3]  waiting groups (zset)
-- KEYS[4]  frontier counters (hash: queued, seq)
-- ARGV[1]  group queue key prefix   ARGV[2]  group counters key prefix
-- ARGV[3]  HOST_PAGE_BUDGET: requests a group may ever be given (0 = no limit)
-- ARGV[4]  level key prefix: the fingerprints live in small hashes
--          prefix .. LEVEL .. ':' .. BUCKET, one field of 7 bytes each
-- ARGV[5]  group data key prefix: each queued request's JSON by id
-- ARGV...  (14-byte fingerprint, group, priority, request JSON) from ARGV[6]: an
--          empty fingerprint skips the seen check (dont_filter), empty JSON only
--          records the fingerprint (a standalone dupefilter check)
-- Returns  {new fingerprints (requests added or over budget), the group of each
--          request dropped over budget, requests dropped over their crawl's budget}
--
-- Why levels: each new fingerprint is one small HSET, so what Redis writes to its
-- AOF and replicas per URL stays the same however many URLs were seen. A bucket
-- stays a compact listpack of at most ~128 fields (~12 bytes per URL); a check
-- looks in every level so far: one more HEXISTS each time the filter grows 4x.
-- (level_for, bucket_key and fingerprint_field come from _dupefilter.lua)
local F = {queue_prefix = ARGV[1], data_prefix = ARGV[5], ready = KEYS[2], waiting = KEYS[3],
           frontier = KEYS[4], added = {}}
local budget = tonumber(ARGV[3])
local level_prefix = ARGV[4]
local count = (#ARGV - 5) / 4
local seq_base = nil  -- taken on the first request queued: a bare check takes none
local seq = 0
local added, over, crawl_over = 0, {}, 0

local top = level_for(tonumber(redis.call('HGET', KEYS[1], 'n') or '0'))

local function seen_before(fp)
  local field = fingerprint_field(fp)
  for level = 0, top do
    if redis.call('HEXISTS', bucket_key(level_prefix, fp, level), field) == 1 then return true end
  end
  return false
end

local new_fingerprints = 0
for i = 6, #ARGV, 4 do
  seq = seq + 1
  local fp = ARGV[i]
  local new = true
  if fp ~= '' then
    if seen_before(fp) then
      new = false
    else
      redis.call('HSET', bucket_key(level_prefix, fp, top), fingerprint_field(fp), '')
      new_fingerprints = new_fingerprints + 1
    end
  end
  if new then
    added = added + 1
    local item = ARGV[i + 3]
    if item ~= '' then
      local group = ARGV[i + 1]
      if budget > 0 and redis.call('HINCRBY', ARGV[2] .. budget_group(group), 'accepted', 1) > budget then
        redis.call('HINCRBY', ARGV[2] .. budget_group(group), 'dropped:budget', 1)
        over[#over + 1] = group
      elseif over_crawl_budget(F, group) then
        crawl_over = crawl_over + 1
      else
        seq_base = seq_base or redis.call('HINCRBY', KEYS[4], 'seq', count) - count
        local id = seq_base + seq
        push(F, group, order_score(tonumber(ARGV[i + 2]), id), string.format('%.0f', id), item)
      end
    end
  end
end
if new_fingerprints > 0 then
  redis.call('HINCRBY', KEYS[1], 'n', new_fingerprints)
end
settle(F)
return {added, over, crawl_over}
