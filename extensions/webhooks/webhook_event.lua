--! include _named
-- A crawl's state changed: told once for the cluster. The new state is set only
-- if the hash still holds what the node read (another node may have told it
-- first), and the event goes to the outbox in the same step, an entry per URL.
-- Keys (by name, _named.lua): states (NAME:webhooks:states), outbox
-- (NAME:webhooks, stream).
-- Arguments: crawl; expected (what the node read, "" for nothing); state (what
-- to hold now: "STATE EVENTS"); id, type (the event's; type "" for a state
-- recorded without an event).
-- Items: two per URL: the URL, the event's body.
-- Returns, by name: told (1: this node told it; 0: the state had moved on).
local K, A, L = named_input()
local held = redis.call('HGET', K.states, A.crawl) or ''
if held ~= A.expected then
  return {'told', 0}
end
redis.call('HSET', K.states, A.crawl, A.state)
if A.type ~= '' then
  for i = 1, #L, 2 do
    redis.call('XADD', K.outbox, '*', 'id', A.id, 'type', A.type, 'url', L[i],
               'body', L[i + 1], 'attempt', '0')
  end
end
return {'told', 1}
