--! include _fields
-- A group's pacing at the host, read from the fields other writers left
-- (number_field, malformed: _fields.lua).

-- A group's pacing: the interval (ms) its requests keep at the host, from its
-- configured rate (NAME:rates), its robots.txt Crawl-delay and its adaptive
-- rate ('arate' in its host hash, set once it pushed back); the spacing (ms)
-- leases and send slots keep, the interval plus the tolerance (and, for a slow
-- group, a margin); the window
-- (ms) a send may come after its slot; and whether the group is watched (it
-- pushed back: nodes report its good answers, so its rate climbs again), its hold end
-- (ms, 0: none) and its next send slot (ms, or nil). The window is the
-- tolerance, which keeps every two sends at least the interval apart. A node
-- later than that asks Redis, which lets it go at once when no later slot was
-- handed out yet: for a group slower than one request per two leads, nearly
-- always. A faster group's next slot is always out already, so there a late
-- send would cost a slot; its window is at least FAST_WINDOW_MS (a busy node's
-- timers fire that late), and two of its sends may come up to that much closer
-- than its interval. P: {rates, crawl_delay, host_prefix, delay_max (s),
-- tolerance (a fraction), lead (ms), default_rate, bad = 0}.
local FAST_WINDOW_MS = 25
-- A slow group's slots are further apart by a margin (a fifth of its interval,
-- at most 100 ms): a node may be held up between its on-time check and the wire
-- (a starved CPU, the server's own loop), and its send then comes that much
-- closer to the next one; the margin keeps the interval at the host.
local SLOW_MARGIN_SHARE, SLOW_MARGIN_MS = 0.2, 100
-- The spacing (ms) slots keep for an interval, and the window a send may come
-- after its slot: the tolerance, at least FAST_WINDOW_MS for a fast pace; a slow
-- pace's slots keep the margin too. For a host and for the levels above it.
local function spacing_of(P, interval)
  local spacing = interval * (1 + P.tolerance)
  local window = interval * P.tolerance
  if spacing <= 2 * P.lead then
    window = math.max(window, FAST_WINDOW_MS)
  else
    spacing = spacing + math.min(interval * SLOW_MARGIN_SHARE, SLOW_MARGIN_MS)
  end
  return spacing, window
end

-- A level's (an address's, a registered domain's) spacing and window: its
-- limit is a rate over any few seconds, not a gap between two sends, so its
-- slots keep no slow margin (which alone would leave a fifth of a slow
-- address's rate unused) and a send may come FAST_WINDOW_MS after its slot.
local function level_spacing_of(P, interval)
  return interval * (1 + P.tolerance), math.max(interval * P.tolerance, FAST_WINDOW_MS)
end

local function host_pacing(P, group, now)
  local rate = number_field(P, redis.call('HGET', P.rates, group)) or P.default_rate
  local fields = redis.call('HMGET', P.host_prefix .. group, 'arate', 'hold', 'win', 'next', 'ew')
  local arate = number_field(P, fields[1])
  local hold = number_field(P, fields[2]) or 0
  P.window_start = number_field(P, fields[3])
  local next_slot = number_field(P, fields[4])
  -- refused lately (the evidence is being gathered): its good answers count too
  local evidence_until = number_field(P, fields[5]) or 0
  if arate and arate > 0 and (rate <= 0 or arate < rate) then
    rate = arate
  end
  local interval = 0
  if rate > 0 then
    interval = 1000 / rate
  end
  local delay = number_field(P, redis.call('HGET', P.crawl_delay, group)) or 0
  interval = math.max(interval, math.min(delay, P.delay_max) * 1000)
  local spacing, window = spacing_of(P, interval)
  return interval, spacing, window, arate ~= nil or hold > now or evidence_until > now, hold,
    next_slot
end

-- The rate a group is leased at, for the whole cluster ('orate', requests/s
-- over the last OBSERVE_MS; 'win' and 'wl', when the current window began and
-- the group's leased count then): what a pushback halves when the group has no
-- rate of its own. One write per group every OBSERVE_MS, none in between
-- (host_pacing read the window's start just before).
local OBSERVE_MS = 10000
local function observe(P, counters, now, leased)
  local start = P.window_start
  if start and now - start < OBSERVE_MS then return end
  if start then
    local at_start = number_field(P, redis.call('HGET', counters, 'wl')) or leased
    local rate = (leased - at_start) * 1000 / (now - start)
    redis.call('HSET', counters, 'orate', string.format('%.3f', rate), 'win', now, 'wl', leased)
  else
    redis.call('HSET', counters, 'win', now, 'wl', leased)
  end
end

-- The levels above a host that pace it together with the other hosts they hold:
-- its registered domain (CLUSTER_DOMAIN_RATE) and its server address
-- (CLUSTER_IP_RATE), each cluster-wide, from the fields the nodes wrote into
-- the host hash once they described it (hosts/levels.py): 'dom', 'ip' (an
-- address; '-': the name has none (NXDOMAIN, no A or AAAA, refused): its
-- requests are leased unpaced, to be dead-lettered with the reason, 'ipr',
-- never fetched; '?': its lookup failed, held) and 'ipx' (when it is looked up
-- again, ms). Each level is a hash, P.domain_prefix .. DOMAIN or
-- P.ip_prefix .. ADDRESS, holding next (its next free send slot, ms); its line,
-- LEVEL .. ':line' (a zset, group -> when it joined), holds the groups that
-- found it busy, woken one a slot (lease.lua), the one woken named in the
-- level's 'turn': a level with a thousand hosts costs a lease what one costs,
-- and its hosts take its slots in turn. Returns the levels ({key, interval,
-- spacing, window, next, turn}, none without those rates), or nil and 'describe' (a node must
-- describe the host first) or nil, 'hold' and until when (its lookup failed),
-- or none, 'unresolvable' and why (the name has no address).
-- P: as host_pacing, with domain_rate, ip_rate, domain_prefix, ip_prefix.
-- A level cut (today an address whose hosts refused together, host_feedback.lua)
-- is held, and its rate halved, climbing back to the rate set over LEVEL_RECOVER_MS.
local LEVEL_RECOVER_MS = 60000
local function pacing_level(P, key, rate, now)
  local f = redis.call('HMGET', key, 'next', 'turn', 'cut')
  local cut = number_field(P, f[3])
  if cut and now > cut then
    rate = rate * (0.5 + 0.5 * math.min((now - cut) / LEVEL_RECOVER_MS, 1))
  end
  local interval = 1000 / rate
  local spacing, window = level_spacing_of(P, interval)
  return {key = key, interval = interval, spacing = spacing, window = window,
          next = number_field(P, f[1]) or 0, turn = f[2]}
end

-- The rate of the level a key names.
local function level_rate(P, key)
  if string.sub(key, 1, #P.domain_prefix) == P.domain_prefix then return P.domain_rate end
  return P.ip_rate
end

-- A level for host_levels: its pacing; with P.apart (a sharded frontier,
-- whose levels are in another slot: claim_levels.lua), its pace from its rate
-- alone and its name (what = 'dom' or 'ip'), its key never read.
local function level_of(P, key, rate, now, what, name)
  if not P.apart then return pacing_level(P, key, rate, now) end
  local spacing, window = level_spacing_of(P, 1000 / rate)
  return {key = key, interval = 1000 / rate, spacing = spacing, window = window, next = 0,
          what = what, name = name}
end

-- What a node claims for a request of a host with these levels when they are
-- apart (claim_levels.lua): 'DOMAIN ADDRESS HOST_INTERVAL_MS' ('' for a level
-- without a rate); '' when there is nothing to claim.
local function claim_of(P, levels, host_interval)
  if not P.apart or not levels or #levels == 0 then return '' end
  local names = {dom = '', ip = ''}
  for _, L in ipairs(levels) do names[L.what] = L.name end
  return string.format('%s %s %.0f', names.dom, names.ip, host_interval)
end

local function host_levels(P, host, now)
  local levels = {}
  if P.domain_rate <= 0 and P.ip_rate <= 0 then return levels end
  local f = redis.call('HMGET', P.host_prefix .. host, 'dom', 'ip', 'ipx', 'ipr')
  if P.domain_rate > 0 then
    if not f[1] or f[1] == '' then return nil, 'describe' end
    if malformed(P, f[1], '^[^%s%c]+$', 253) then return nil, 'describe' end
    levels[#levels + 1] = level_of(P, P.domain_prefix .. f[1], P.domain_rate, now, 'dom', f[1])
  end
  if P.ip_rate > 0 then
    local expires = number_field(P, f[3])
    if not f[2] or f[2] == '' or not expires then return nil, 'describe' end
    if malformed(P, f[2], '^[%x:%.?-]+$', 45) then return nil, 'describe' end
    if f[2] == '?' and expires > now then return nil, 'hold', expires end
    if expires <= now then return nil, 'describe' end
    if f[2] == '-' then return levels, 'unresolvable', string.sub(f[4] or 'no address', 1, 200) end
    levels[#levels + 1] = level_of(P, P.ip_prefix .. f[2], P.ip_rate, now, 'ip', f[2])
  end
  return levels
end

-- Hosts of one address held for their own refusals, bans or errors within the
-- evidence window that say the server refuses, not one of its names.
local ADDRESS_REFUSERS = 2

-- A host of the address at ``key`` held until ``hold`` (ms) for ``kind``:
-- once a second host of it is held within ``window`` (ms), the address is held
-- as long (every host on it waits) and its rate halved, climbing back over
-- LEVEL_RECOVER_MS (pacing_level). host_feedback.lua; address_cut.lua for a
-- sharded frontier, whose addresses are not in the hosts' shards.
local function refused_at_address(key, group, hold, kind, now, window)
  local refusers = key .. ':refused'
  redis.call('ZADD', refusers, now, group)
  redis.call('ZREMRANGEBYSCORE', refusers, '-inf', now - window)
  redis.call('PEXPIRE', refusers, window)
  if redis.call('ZCARD', refusers) < ADDRESS_REFUSERS then return end
  local last = tonumber(redis.call('HGET', key, 'next')) or 0
  if last ~= last or last == math.huge then last = 0 end  -- (no node writes those)
  local next_slot = math.max(last, hold)
  redis.call('HSET', key, 'next', string.format('%.0f', next_slot), 'cut', now, 'why', kind)
  redis.call('PEXPIRE', key, math.ceil(next_slot - now) + LEVEL_RECOVER_MS)
end

-- A level's next slot after one was handed out; kept while it paces anything,
-- then gone (a crawl's millions of addresses cost nothing once idle).
local LEVEL_KEEP_MS = 60000
local function save_level(L, now)
  redis.call('HSET', L.key, 'next', string.format('%.0f', L.next))
  redis.call('PEXPIRE', L.key, math.ceil(math.max(L.next - now, 0)) + LEVEL_KEEP_MS)
end

-- The rates of the levels (NAME:rates '*domain' and '*ip'), into P.
local function read_level_rates(P, rates_key)
  local r = redis.call('HMGET', rates_key, '*domain', '*ip')
  P.domain_rate = number_field(P, r[1]) or 0
  P.ip_rate = number_field(P, r[2]) or 0
end
