--! include _named _entries _queues
-- Queue pages whose recrawl is due, taken from a status store outside Redis
-- (RECRAWL_STORE = "mongo"): each page's fingerprint is marked in revisit as it
-- is queued, and a page already marked (queued by a node that died before the
-- store heard of it) is not queued again. The mark goes with the release of the
-- page's lease, after its new status is in the store.
-- Keys (by name, _named.lua): revisit (pages queued from the store, hash:
-- fingerprint -> group); ready, waiting (groups, zsets); frontier (counters:
-- queued, seq).
-- Arguments: queue_prefix, data_prefix (group queue and data key prefixes).
-- Items: fingerprint, group, request JSON; repeated.
-- Returns  how many pages were queued
local K, A, L = named_input()
local F = {queue_prefix = A.queue_prefix, data_prefix = A.data_prefix, ready = K.ready, waiting = K.waiting,
           frontier = K.frontier, added = {}}
local fresh = {}
for i = 1, #L - 2, 3 do
  if redis.call('HSETNX', K.revisit, L[i], L[i + 1]) == 1 then
    fresh[#fresh + 1] = i
  end
end
if #fresh == 0 then
  return 0
end
local ids = new_ids(F, #fresh)
for n, i in ipairs(fresh) do
  local item = L[i + 2]
  push(F, L[i + 1], priority_score(item) + (tonumber(ids[n]) % SEQ_SPAN), ids[n], item)
end
settle(F)
return #fresh
