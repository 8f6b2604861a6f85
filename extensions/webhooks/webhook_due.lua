--! include _named
-- Events due to be tried again, back into the outbox, each by one node alone.
-- Keys (by name, _named.lua): later (NAME:webhooks:later), outbox
-- (NAME:webhooks), dead (NAME:webhooks:dead).
-- Arguments: now (Redis's clock, ms), batch.
-- Returns, by name: moved; refused (entries another writer left that are no
-- event: kept in dead, with the reason).
local K, A, L = named_input(true)
local due = redis.call('ZRANGEBYSCORE', K.later, 0, A.now, 'LIMIT', 0, tonumber(A.batch))
local moved, refused = 0, 0
for _, member in ipairs(due) do
  redis.call('ZREM', K.later, member)
  local ok, event = pcall(cjson.decode, member)
  if ok and type(event) == 'table' and type(event.id) == 'string' and type(event.url) == 'string'
      and type(event.body) == 'string' then
    redis.call('XADD', K.outbox, '*', 'id', event.id, 'type', tostring(event.type or ''),
               'url', event.url, 'body', event.body, 'attempt', tostring(event.attempt or '0'))
    moved = moved + 1
  else
    redis.call('LPUSH', K.dead, cjson.encode({error = 'not an event', raw = string.sub(member, 1, 2000)}))
    refused = refused + 1
  end
end
return {'moved', moved, 'refused', refused}
