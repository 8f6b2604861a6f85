--! include _named
-- A Parquet segment committed in the transaction that releases its pages'
-- leases (before the release, so the leases are read as they stand): its record
-- goes into the manifest, with the pages whose lease this node no longer holds
-- (taken for dead, given to another node, which stores their items itself)
-- added to those its file leaves out.
-- Keys (by name, _named.lua): leases (the node's), files (NAME:parquet:files).
-- Arguments: segment (its id), record (JSON, with a leave_out list).
-- Items: the lease members released with it.
-- Returns how many pages were left out for a lost lease.
local K, A, L = named_input()
local lost = {}
for from = 1, #L, 1000 do
  local last = math.min(from + 999, #L)
  local scores = redis.call('ZMSCORE', K.leases, unpack(L, from, last))
  for at = from, last do
    if not scores[at - from + 1] then lost[#lost + 1] = L[at] end
  end
end
local record = A.record
if #lost > 0 then
  local decoded = cjson.decode(record)
  local leave_out = {}
  if type(decoded.leave_out) == 'table' then
    for _, page in ipairs(decoded.leave_out) do leave_out[#leave_out + 1] = page end
  end
  for _, page in ipairs(lost) do leave_out[#leave_out + 1] = page end
  decoded.leave_out = leave_out
  record = cjson.encode(decoded)
end
redis.call('HSET', K.files, A.segment, record)
return #lost
