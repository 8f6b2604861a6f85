-- Add requests to the shared queue unless their fingerprint was seen before.
-- KEYS[1]  dupefilter (hash): 2-byte bucket -> its fingerprints' 12-byte tails,
--          concatenated; field 'n' counts the fingerprints. Tens of thousands
--          of buckets keep per-entry overhead near zero: ~13 bytes per URL.
-- KEYS[2]  request queue (zset, score = -priority)
-- ARGV     (14-byte fingerprint, score, request JSON) triples; an empty
--          fingerprint skips the seen check (dont_filter), empty JSON only
--          records the fingerprint (a standalone dupefilter check)
-- Returns  how many fingerprints were new (requests added).
local TAIL = 12
local added = 0
for i = 1, #ARGV, 3 do
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
    if ARGV[i + 2] ~= '' then
      redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i + 2])
    end
    added = added + 1
  end
end
return added
