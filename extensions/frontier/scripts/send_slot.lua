--! include _named _pacing
-- May a request go to its host now? Asked by a node for a watched group (one
-- that pushed back) before each send, and for a paced group when the node is
-- about to send later than its lease's slot allowed: held, it waits; late, it
-- gets the group's next free slot, so no two sends from any nodes come closer
-- than the group's interval.
-- Keys (by name, _named.lua): rates (hash: group or '*' -> requests per
-- second), crawl_delay (robots.txt Crawl-delay per group, seconds).
-- Arguments: group; now (ms since epoch); slot (the request's slot from its
-- lease or from this script, ms; 0: none); window (ms after its slot it may
-- still be sent); host_prefix (host hash key prefix); delay_max (the most
-- seconds a Crawl-delay may ask for); tolerance (the send tolerance, a fraction
-- of the interval); lead (ms before its next slot a paced group may be leased).
-- Returns, by name: verdict ('send': send now, at = now | 'wait': send at the
-- slot, at = 'SLOT:WINDOW' (ms), at most WINDOW later: the slot is taken |
-- 'hold': the group is held (backing off) until at (ms)), and bad (how many
-- malformed host fields were ignored)
local K, A = named_input()
local group, now, slot = A.group, tonumber(A.now), tonumber(A.slot)
local window = tonumber(A.window)
local P = {rates = K.rates, crawl_delay = K.crawl_delay, host_prefix = A.host_prefix,
           delay_max = tonumber(A.delay_max), tolerance = tonumber(A.tolerance),
           lead = tonumber(A.lead), bad = 0}
P.default_rate = number_field(P, redis.call('HGET', K.rates, '*')) or 0
local key = P.host_prefix .. group
local hold = number_field(P, redis.call('HGET', key, 'hold')) or 0
if hold > now then
  return {'verdict', 'hold', 'at', string.format('%.0f', hold), 'bad', P.bad}
end
local interval, spacing, slot_window = host_pacing(P, group, now)
if interval <= 0 or (slot > 0 and now >= slot and now <= slot + window) then
  return {'verdict', 'send', 'at', string.format('%.0f', now), 'bad', P.bad}
end
local next_slot = number_field(P, redis.call('HGET', key, 'next')) or 0
if next_slot <= now or (slot > 0 and next_slot <= slot + spacing + 1) then
  -- the group's next slot has passed unused, or it is the one right after this
  -- request's (none later was handed out): this send goes now, the next follows it
  redis.call('HSET', key, 'next', string.format('%.0f', now + spacing))
  return {'verdict', 'send', 'at', string.format('%.0f', now), 'bad', P.bad}
end
redis.call('HSET', key, 'next', string.format('%.0f', next_slot + spacing))
return {'verdict', 'wait', 'at', string.format('%.0f:%.0f', next_slot, slot_window), 'bad', P.bad}
