-- Add requests to the shared queue unless their fingerprint was seen before.
-- KEYS[1]  dupefilter set
-- KEYS[2]  request queue (zset, score = -priority)
-- ARGV     (fingerprint, score, request JSON) triples; an empty fingerprint
--          skips the seen check (dont_filter)
-- Returns  how many requests were added.
local added = 0
for i = 1, #ARGV, 3 do
  local fp = ARGV[i]
  if fp == '' or redis.call('SADD', KEYS[1], fp) == 1 then
    redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i + 2])
    added = added + 1
  end
end
return added
