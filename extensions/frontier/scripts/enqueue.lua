-- Add requests to their groups' queues unless their fingerprint was seen before.
-- KEYS[1]  dupefilter (hash): field 'n' counts the fingerprints. A dupefilter
--          written before levels also holds 2-byte buckets of 12-byte tails side
--          by side there; they are still read, never written.
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
--          request dropped over budget}
--
-- Why levels: each new fingerprint is one small HSET, so what Redis writes to its
-- AOF and replicas per URL stays the same however many URLs were seen. Level L
-- has 4096 * 4^L buckets and takes new fingerprints while the filter holds fewer
-- than its capacity (90 per bucket, counting the levels below), so a bucket
-- stays a compact listpack of at most ~128 fields (~12 bytes per URL); a check
-- looks in every level so far: one more HEXISTS each time the filter grows 4x.
local TAIL = 12
local FIRST_BUCKETS = 4096
local PER_BUCKET = 90
local F = {queue_prefix = ARGV[1], data_prefix = ARGV[5], ready = KEYS[2], waiting = KEYS[3],
           frontier = KEYS[4], added = {}}
local budget = tonumber(ARGV[3])
local level_prefix = ARGV[4]
local count = (#ARGV - 5) / 4
local seq_base = nil  -- taken on the first request queued: a bare check takes none
local seq = 0
local added, over = 0, {}

local seen_count = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local legacy = redis.call('HLEN', KEYS[1]) > 1  -- buckets of the layout before levels
local top, capacity, buckets = 0, FIRST_BUCKETS * PER_BUCKET, FIRST_BUCKETS
while seen_count >= capacity and top < 9 do
  top = top + 1
  buckets = buckets * 4
  capacity = capacity + buckets * PER_BUCKET
end

local function bucket_key(fp, level)
  local b1, b2, b3, b4 = string.byte(fp, 1, 4)
  local word = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  local bits = 12 + 2 * level
  return level_prefix .. level .. ':' .. math.floor(word / 2 ^ (32 - bits))
end

local function in_legacy(fp)
  local stored = redis.call('HGET', KEYS[1], string.sub(fp, 1, 2))
  if not stored then return false end
  local tail = string.sub(fp, 3, 2 + TAIL)
  local from = 1
  while true do
    local at = string.find(stored, tail, from, true)
    if not at then return false end
    if (at - 1) % TAIL == 0 then return true end  -- a whole entry, not across two
    from = at + 1
  end
end

local function seen_before(fp)
  local field = string.sub(fp, 5, 11)
  for level = 0, top do
    if redis.call('HEXISTS', bucket_key(fp, level), field) == 1 then return true end
  end
  return legacy and in_legacy(fp)
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
      redis.call('HSET', bucket_key(fp, top), string.sub(fp, 5, 11), '')
      new_fingerprints = new_fingerprints + 1
    end
  end
  if new then
    added = added + 1
    local item = ARGV[i + 3]
    if item ~= '' then
      local group = ARGV[i + 1]
      if budget > 0 and redis.call('HINCRBY', ARGV[2] .. group, 'accepted', 1) > budget then
        redis.call('HINCRBY', ARGV[2] .. group, 'dropped:budget', 1)
        over[#over + 1] = group
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
return {added, over}
