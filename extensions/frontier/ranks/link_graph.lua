--! include _named _ranks
-- Learn the link graph a host at a time (frontier/ranks/): each link is a queue
-- group (a host), the queue group a request for it joined (its crawl, its
-- lane) and a registered domain that links to it. The group's HyperLogLog of
-- linking domains takes the domain; when that grew, its rank rises to the
-- count (a higher rank an import gave stays) and, by importance, the queue
-- group moves ahead among the ready ones (_ranks.lua promote).
-- Keys (by name, _named.lua): hostrank (zset: group -> rank); ready (the ready
-- groups of the crawl without an id); frontier (its 'order').
-- Arguments: inlinks_prefix (+ group: its HyperLogLog); data_prefix (where a
-- crawl's keys are found, _crawls.lua).
-- Items: three per link: group, queue group, domain.
-- Returns, by name: raised (groups whose rank rose), bad (keys of ours that were
-- something else, replaced).
local K, A, L = named_input()
local F = {data_prefix = A.data_prefix, ready = K.ready, frontier = K.frontier}
local raised, bad = 0, 0
-- a key of ours another writer left as something else is replaced, and counted
local function replaced(key, kind)
  if redis.call('TYPE', key)['ok'] ~= kind and redis.call('EXISTS', key) == 1 then
    redis.call('DEL', key)
    bad = bad + 1
  end
end
replaced(K.hostrank, 'zset')
for i = 1, #L - 2, 3 do
  local group = L[i]
  local key = A.inlinks_prefix .. group
  local added = redis.pcall('PFADD', key, L[i + 2])
  if type(added) == 'table' then  -- not a HyperLogLog
    redis.call('DEL', key)
    bad = bad + 1
    added = redis.call('PFADD', key, L[i + 2])
  end
  if added == 1 then
    local count = redis.call('PFCOUNT', key)
    local before = redis.call('ZSCORE', K.hostrank, group)
    if redis.call('ZADD', K.hostrank, 'GT', 'CH', count, group) == 1 then
      raised = raised + 1
      promote(F, L[i + 1], before, count)
    end
  end
end
return {'raised', raised, 'bad', bad}
