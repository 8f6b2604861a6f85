-- Add requests to the shared queue unless the Bloom filter has seen them.
-- KEYS[1]  request queue (zset, score = -priority)
-- KEYS[2]  count of fingerprints added to the filter (string)
-- ARGV[1]  shard key prefix; shard N is prefix .. N
-- ARGV[2]  k, the bit positions per fingerprint
-- ARGV...  per request: shard ('' = dont_filter: no check), k offsets, score, request JSON
--          (empty JSON only records the fingerprint)
-- Returns  how many requests were added.
local k = tonumber(ARGV[2])
local added = 0
local i = 3
while i <= #ARGV do
  local shard = ARGV[i]
  local new = true
  if shard ~= '' then
    local key = ARGV[1] .. shard
    new = false
    for j = 1, k do
      if redis.call('SETBIT', key, ARGV[i + j], 1) == 0 then
        new = true
      end
    end
    if new then
      redis.call('INCR', KEYS[2])
    end
  end
  if new then
    if ARGV[i + k + 2] ~= '' then
      redis.call('ZADD', KEYS[1], ARGV[i + k + 1], ARGV[i + k + 2])
    end
    added = added + 1
  end
  i = i + k + 3
end
return added
