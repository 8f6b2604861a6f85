--! include _named
-- Join pieces to the crawl's manifest (frontier/manifest.py): the union of
-- what it names and the items, in name order, written back when it grew.
-- Keys (by name, _named.lua): frontier (hash: 'pieces', names joined by ',').
-- Items: the pieces' names.
-- Returns  the manifest after
local K, A, L = named_input()
local have, names = {}, {}
local current = redis.call('HGET', K.frontier, 'pieces')
if type(current) ~= 'string' then current = '' end
for name in string.gmatch(current, '[^,]+') do
  if not have[name] then have[name] = true; names[#names + 1] = name end
end
local grew = current == '' and redis.call('HEXISTS', K.frontier, 'pieces') == 0
for _, name in ipairs(L) do
  if not have[name] then have[name] = true; names[#names + 1] = name; grew = true end
end
table.sort(names)
local joined = table.concat(names, ',')
if grew then redis.call('HSET', K.frontier, 'pieces', joined) end
return joined
