-- Add requests to their groups' queues unless their fingerprint was seen before.
-- KEYS[1]  dupefilter (hash): 2-byte bucket -> its fingerprints' 12-byte tails,
--          concatenated; field 'n' counts the fingerprints. Tens of thousands
--          of buckets keep per-entry overhead near zero: ~13 bytes per URL.
-- KEYS[2]  ready groups (zset)      KEYS[3]  waiting groups (zset)
-- KEYS[4]  frontier counters (hash: queued, seq)
-- ARGV[1]  group queue key prefix   ARGV[2]  group counters key prefix
-- ARGV[3]  HOST_PAGE_BUDGET: requests a group may ever be given (0 = no limit)
-- ARGV...  (14-byte fingerprint, group, priority, request JSON) from ARGV[4]: an
--          empty fingerprint skips the seen check (dont_filter), empty JSON only
--          records the fingerprint (a standalone dupefilter check)
-- Returns  {new fingerprints (requests added or over budget), the group of each
--          request dropped over budget}
local TAIL = 12
local F = {queue_prefix = ARGV[1], ready = KEYS[2], waiting = KEYS[3], frontier = KEYS[4]}
local budget = tonumber(ARGV[3])
local count = (#ARGV - 3) / 4
local seq_base = nil  -- taken on the first request queued: a bare check takes none
local seq = 0
local added, over = 0, {}
for i = 4, #ARGV, 4 do
  seq = seq + 1
  local fp = ARGV[i]
  local new = true
  if fp ~= '' then
    local bucket = string.sub(fp, 1, 2)
    local tail = string.sub(fp, 3, 2 + TAIL)
    local stored = redis.call('HGET', KEYS[1], bucket) or ''
    local from = 1
    while true do
      local at = string.find(stored, tail, from, true)
      if not at then break end
      if (at - 1) % TAIL == 0 then  -- a whole entry, not a match across two
        new = false
        break
      end
      from = at + 1
    end
    if new then
      redis.call('HSET', KEYS[1], bucket, stored .. tail)
      redis.call('HINCRBY', KEYS[1], 'n', 1)
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
        push(F, group, order_score(tonumber(ARGV[i + 2]), seq_base + seq), item)
      end
    end
  end
end
return {added, over}
