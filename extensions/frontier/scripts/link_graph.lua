--! include _named
-- Learn the link graph a host at a time (frontier/ranks/): each pair of
-- items is a queue group (a host) and a registered domain that links to it. The
-- group's HyperLogLog of linking domains takes the domain; when that grew, its
-- rank rises to the count (a higher rank an import gave stays).
-- Keys (by name, _named.lua): hostrank (zset: group -> rank).
-- Arguments: inlinks_prefix (+ group: its HyperLogLog).
-- Items: two per link: group, domain.
-- Returns, by name: raised (groups whose rank rose).
local K, A, L = named_input()
local raised = 0
for i = 1, #L - 1, 2 do
  local key = A.inlinks_prefix .. L[i]
  if redis.call('PFADD', key, L[i + 1]) == 1 then
    local count = redis.call('PFCOUNT', key)
    raised = raised + redis.call('ZADD', K.hostrank, 'GT', 'CH', count, L[i])
  end
end
return {'raised', raised}
