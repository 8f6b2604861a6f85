--! include _named _dupefilter
-- Upgrade the exact dupefilter's layout of earlier versions (2-byte buckets of
-- 12-byte tails side by side in NAME:dupefilter) into its levels, a batch of
-- buckets at a time: each fingerprint goes to the level it would have gone to
-- had it been added with levels (the old ones were the first ones added).
-- Keys (by name, _named.lua): dupefilter (hash: 'n' and the old buckets).
-- Arguments: level_prefix (level key prefix), moved (fingerprints already
-- moved). Items: the old buckets (2-byte fields) to move now.
-- Returns  fingerprints moved in all, this batch included
local K, A, L = named_input()
local moved = tonumber(A.moved)
for _, bucket in ipairs(L) do
  local tails = redis.call('HGET', K.dupefilter, bucket)
  if tails and #bucket == 2 then
    for from = 1, #tails - TAIL + 1, TAIL do
      local fp = bucket .. string.sub(tails, from, from + TAIL - 1)
      redis.call('HSET', bucket_key(A.level_prefix, fp, level_for(moved)), fingerprint_field(fp), '')
      moved = moved + 1
    end
  end
  redis.call('HDEL', K.dupefilter, bucket)
end
return moved
