--! include _named
-- Items into the stream store's stream, each once: an item whose id the stream
-- holds with the same digest (a page fetched twice, an unchanged recrawl) is
-- not added again; a changed one is. Past maxlen the oldest entries go, and
-- with them what the ids hash knows of them, so both stay bounded.
-- Keys (by name, _named.lua): stream (NAME:items), ids (NAME:items:ids, hash:
-- item id -> "DIGEST ENTRY", for the entries the stream holds).
-- Arguments: maxlen.
-- Items: four per item: its id, the digest of its fields, its collection ("":
-- the spider's), its JSON.
-- Returns, by name: added, unchanged, trimmed.
local K, A, L = named_input()
for key, kind in pairs({[K.stream] = 'stream', [K.ids] = 'hash'}) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= kind then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. found .. ', not a ' .. kind)
  end
end
local maxlen = tonumber(A.maxlen)
local added, unchanged, trimmed = 0, 0, 0
for i = 1, #L, 4 do
  local id, digest, collection, item = L[i], L[i + 1], L[i + 2], L[i + 3]
  local known = redis.call('HGET', K.ids, id)
  if known and string.sub(known, 1, #digest + 1) == digest .. ' ' then
    unchanged = unchanged + 1
  else
    local entry
    if collection == '' then
      entry = redis.call('XADD', K.stream, '*', '_id', id, 'item', item)
    else
      entry = redis.call('XADD', K.stream, '*', '_id', id, 'item', item, 'collection', collection)
    end
    redis.call('HSET', K.ids, id, digest .. ' ' .. entry)
    added = added + 1
  end
end
local over = redis.call('XLEN', K.stream) - maxlen
local after = '-'
while over > trimmed do
  local oldest = redis.call('XRANGE', K.stream, after, '+', 'COUNT', math.min(over - trimmed, 1000))
  if #oldest == 0 then break end
  for _, entry in ipairs(oldest) do
    local fields = entry[2]
    if fields[1] == '_id' and fields[2] then
      local known = redis.call('HGET', K.ids, fields[2])
      if known and string.sub(known, -#entry[1] - 1) == ' ' .. entry[1] then
        redis.call('HDEL', K.ids, fields[2])
      end
    end
  end
  trimmed = trimmed + #oldest
  after = '(' .. oldest[#oldest][1]
end
if trimmed > 0 then
  redis.call('XTRIM', K.stream, 'MAXLEN', maxlen)
end
return {'added', added, 'unchanged', unchanged, 'trimmed', trimmed}
