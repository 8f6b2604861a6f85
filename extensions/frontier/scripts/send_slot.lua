--! include _pacing
-- May a request go to its host now? Asked by a node for a watched group (one
-- that pushed back) before each send, and for a paced group when the node is
-- about to send later than its lease's slot allowed: held, it waits; late, it
-- gets the group's next free slot, so no two sends from any nodes come closer
-- than the group's interval.
-- KEYS[1]  rates (hash: group or '*' -> requests per second)
-- KEYS[2]  robots.txt Crawl-delay per group (hash, seconds)
-- ARGV[1]  group                    ARGV[2]  now (ms since epoch)
-- ARGV[3]  the request's slot from its lease or from this script (ms; 0: none)
-- ARGV[4]  ms after its slot it may still be sent
-- ARGV[5]  host hash key prefix     ARGV[6]  the most seconds a Crawl-delay may ask for
-- ARGV[7]  the send tolerance (a fraction of the interval)
-- ARGV[8]  ms before its next slot a paced group may be leased
-- Returns  {'send', now}: send now | {'wait', 'SLOT:WINDOW' (ms)}: send at the
--          slot, at most WINDOW later: the slot is taken |
--          {'hold', until (ms)}: the group is held (backing off) until then;
--          and how many malformed host fields were ignored
local group, now, slot = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local P = {rates = KEYS[1], crawl_delay = KEYS[2], host_prefix = ARGV[5],
           delay_max = tonumber(ARGV[6]), tolerance = tonumber(ARGV[7]),
           lead = tonumber(ARGV[8]), bad = 0}
P.default_rate = number_field(P, redis.call('HGET', KEYS[1], '*')) or 0
local key = P.host_prefix .. group
local hold = number_field(P, redis.call('HGET', key, 'hold')) or 0
if hold > now then
  return {'hold', string.format('%.0f', hold), P.bad}
end
local interval, spacing, slot_window = host_pacing(P, group, now)
if interval <= 0 or (slot > 0 and now >= slot and now <= slot + window) then
  return {'send', string.format('%.0f', now), P.bad}
end
local next_slot = number_field(P, redis.call('HGET', key, 'next')) or 0
if next_slot <= now or (slot > 0 and next_slot <= slot + spacing + 1) then
  -- the group's next slot has passed unused, or it is the one right after this
  -- request's (none later was handed out): this send goes now, the next follows it
  redis.call('HSET', key, 'next', string.format('%.0f', now + spacing))
  return {'send', string.format('%.0f', now), P.bad}
end
redis.call('HSET', key, 'next', string.format('%.0f', next_slot + spacing))
return {'wait', string.format('%.0f:%.0f', next_slot, slot_window), P.bad}
