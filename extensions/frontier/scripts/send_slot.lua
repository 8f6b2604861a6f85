--! include _named _fields _pacing
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
-- of the interval); lead (ms before its next slot a paced group may be leased);
-- domain_prefix, ip_prefix (its levels' keys: lease.lua): a slot given here is
-- after every level's next too.
-- Returns, by name: verdict ('send': send now, at = now | 'wait': send at the
-- slot, at = 'SLOT:WINDOW' (ms), at most WINDOW later: the slot is taken |
-- 'later': the next free slot is further than a lease's lead: ask again at at
-- (ms), nothing taken | 'hold': the group is held (backing off) until at
-- (ms)), bad (how many malformed host fields were ignored) and claim (with
-- levels_apart, a sharded frontier's: what the node claims at the levels,
-- claim_levels.lua, for a 'send' or 'wait'; '' none)
local K, A = named_input()
local group, now, slot = A.group, tonumber(A.now), tonumber(A.slot)
local window = tonumber(A.window)
local P = {rates = K.rates, crawl_delay = K.crawl_delay, host_prefix = A.host_prefix,
           delay_max = tonumber(A.delay_max), tolerance = tonumber(A.tolerance),
           lead = tonumber(A.lead), bad = 0}
P.default_rate = number_field(P, redis.call('HGET', K.rates, '*')) or 0
P.domain_prefix, P.ip_prefix = A.domain_prefix, A.ip_prefix
P.apart = A.levels_apart == '1'
read_level_rates(P, K.rates)
local key = P.host_prefix .. group
local hold = number_field(P, redis.call('HGET', key, 'hold')) or 0
if hold > now then
  return {'verdict', 'hold', 'at', string.format('%.0f', hold), 'bad', P.bad, 'claim', ''}
end
local interval, spacing, slot_window = host_pacing(P, group, now)
local host_interval = interval
-- (a host not described yet, or whose lookup failed, keeps its own pace here:
-- its lease waits for that, and this request was leased before)
local levels = host_levels(P, group, now) or {}
-- levels apart (a sharded frontier): the node claims the slot at the levels
-- (claim_levels.lua), with this: 'DOMAIN ADDRESS HOST_INTERVAL_MS'
local claim = claim_of(P, levels, host_interval)
for _, L in ipairs(levels) do
  if interval <= 0 then slot_window = L.window else slot_window = math.min(slot_window, L.window) end
  interval = math.max(interval, L.interval)
  spacing = math.max(spacing, L.spacing)
end
if interval <= 0 or (slot > 0 and now >= slot and now <= slot + window) then
  return {'verdict', 'send', 'at', string.format('%.0f', now), 'bad', P.bad, 'claim', claim}
end
local next_slot = number_field(P, redis.call('HGET', key, 'next')) or 0
if claim ~= '' then
  -- levels apart: the claim keeps the host's pace and its levels' and reserves
  -- a slot further off for this request; a slot timed here as well would fall
  -- apart from that reservation and miss it, again at every ask. The host's
  -- next lease here waits a spacing, as after any send.
  redis.call('HSET', key, 'next', string.format('%.0f', math.max(next_slot, now + spacing)))
  return {'verdict', 'send', 'at', string.format('%.0f', now), 'bad', P.bad, 'claim', claim}
end
-- the send goes now when no slot after this request's was handed out, at the
-- host and at each level (its next slot passed unused, or it is the one right after)
local free = next_slot <= now or (slot > 0 and next_slot <= slot + spacing + 1)
local first = next_slot
for _, L in ipairs(levels) do
  free = free and (L.next <= now or (slot > 0 and L.next <= slot + L.spacing + 1))
  first = math.max(first, L.next)
end
local at = now
if not free then at = math.max(first, now) end
if at - now > P.lead then
  -- a slot taken this far ahead is lost when its node wakes late for it (a
  -- busy node does), and every late one would queue behind it: the request
  -- asks again when the free slot is as near as a lease would take it
  return {'verdict', 'later', 'at', string.format('%.0f', at - P.lead), 'bad', P.bad, 'claim', ''}
end
redis.call('HSET', key, 'next', string.format('%.0f', at + spacing))
for _, L in ipairs(P.apart and {} or levels) do
  L.next = at + L.spacing
  save_level(L, now)
end
if free then
  return {'verdict', 'send', 'at', string.format('%.0f', now), 'bad', P.bad, 'claim', claim}
end
return {'verdict', 'wait', 'at', string.format('%.0f:%.0f', at, slot_window), 'bad', P.bad,
        'claim', claim}
