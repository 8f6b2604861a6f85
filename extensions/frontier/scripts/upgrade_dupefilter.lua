--! include _dupefilter
-- Upgrade the exact dupefilter's layout of earlier versions (2-byte buckets of
-- 12-byte tails side by side in NAME:dupefilter) into its levels, a batch of
-- buckets at a time: each fingerprint goes to the level it would have gone to
-- had it been added with levels (the old ones were the first ones added).
-- KEYS[1]  dupefilter (hash: 'n' and the old buckets)
-- ARGV[1]  level key prefix   ARGV[2]  fingerprints already moved
-- ARGV[3..] the old buckets (2-byte fields) to move now
-- Returns  fingerprints moved in all, this batch included
local moved = tonumber(ARGV[2])
for i = 3, #ARGV do
  local bucket = ARGV[i]
  local tails = redis.call('HGET', KEYS[1], bucket)
  if tails and #bucket == 2 then
    for from = 1, #tails - TAIL + 1, TAIL do
      local fp = bucket .. string.sub(tails, from, from + TAIL - 1)
      redis.call('HSET', bucket_key(ARGV[1], fp, level_for(moved)), fingerprint_field(fp), '')
      moved = moved + 1
    end
  end
  redis.call('HDEL', KEYS[1], bucket)
end
return moved
