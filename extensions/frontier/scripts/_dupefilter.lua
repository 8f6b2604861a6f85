-- The exact dupefilter's buckets.

-- The exact dupefilter's levels: level L has 4096 * 4^L buckets (small hashes,
-- prefix .. L .. ':' .. BUCKET) and takes new fingerprints while the filter
-- holds fewer than its capacity (90 per bucket, counting the levels below); a
-- fingerprint's bucket is its first bytes, its field the 7 bytes after them.
local TAIL = 12
local FIRST_BUCKETS = 4096
local PER_BUCKET = 90

-- The level that takes the fingerprint the filter counts as its (count + 1)th.
local function level_for(count)
  local top, capacity, buckets = 0, FIRST_BUCKETS * PER_BUCKET, FIRST_BUCKETS
  while count >= capacity and top < 9 do
    top = top + 1
    buckets = buckets * 4
    capacity = capacity + buckets * PER_BUCKET
  end
  return top
end

local function bucket_key(level_prefix, fp, level)
  local b1, b2, b3, b4 = string.byte(fp, 1, 4)
  local word = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  local bits = 12 + 2 * level
  return string.format('%s%d:%d', level_prefix, level, math.floor(word / 2 ^ (32 - bits)))
end

local function fingerprint_field(fp)
  return string.sub(fp, 5, 11)
end
