--! include _named _fields _pacing
-- Send slots at the levels above hosts for a sharded frontier's leases: a
-- registered domain's and an address's hosts are in many shards, and a lease
-- runs in one, so the lease names each request's levels (lease.lua, levels
-- apart) and the node claims their slots here, in the slot all of them share.
-- The host's own pace is kept here too (NAME:pace:HOST, next): a send then
-- keeps its host's interval and every level's at once, whatever node sends it.
-- A request whose slot is further off than a lead reserves it (the host's
-- 'res'), and goes back to its queue, its host waiting until then: the slots
-- of a busy address go to its hosts in the order they asked, each reserved
-- once, never handed out twice, so a thousand hosts on one address take its
-- slots in turn. A reservation missed (its host came back after its window)
-- is lost, and the host asks anew, after every slot given.
-- Keys (by name): rates (hash: '*domain', '*ip' -> requests per second).
-- Arguments: now (ms); tolerance (the send tolerance, a fraction of the
-- interval); lead (ms before its slot a request may be leased); early (ms
-- before a reserved slot its host is leased again and may take it: a lease
-- comes a busy node's moment late, and a reservation missed is a slot of the
-- level lost to every host); pace_prefix,
-- domain_prefix, ip_prefix (the host's, a domain's and an address's key prefix).
-- Items, five a request: host, registered domain ('' none), address ('' none),
-- slot (ms: the lease's, not before it; 0 none), the host's interval (ms; 0 none).
-- Returns, by name: slots (a request's 'SLOT:WINDOW', ms: granted, send at SLOT
-- and at most WINDOW after it; or 'R:RETRY': its host waits until RETRY, ms,
-- and is leased again then), bad (malformed fields ignored), missed (how many
-- reservations their hosts came too late for).
local K, A, L = named_input()
local now, lead = tonumber(A.now), tonumber(A.lead)
local early = math.max(lead, tonumber(A.early) or 0)
local P = {tolerance = tonumber(A.tolerance), lead = lead, bad = 0,
           domain_prefix = A.domain_prefix, ip_prefix = A.ip_prefix}
read_level_rates(P, K.rates)
local KEEP_MS = 60000  -- a host's pace is kept this long after its last slot

-- A level's slots past its next free one that are taken already (LEVEL:booked,
-- zset of ms): a host under two levels takes its slot where both are free, and
-- the slots it leaves before it at the other level stay free for other hosts.
local function bookings(V)
  if not V.booked then
    V.booked_key = V.key .. ':booked'
    redis.call('ZREMRANGEBYSCORE', V.booked_key, '-inf', V.next - V.spacing)
    -- (their scores, which Redis keeps as numbers, whatever another writer left)
    local found = redis.call('ZRANGEBYSCORE', V.booked_key, V.next - V.spacing, '+inf',
                             'WITHSCORES', 'LIMIT', 0, 200)
    V.booked = {}
    for j = 2, #found, 2 do V.booked[#V.booked + 1] = tonumber(found[j]) end
  end
  return V.booked
end

-- The first time from t on free at level V: its next slot or later, a spacing
-- from every slot booked.
local function first_free(V, t)
  t = math.max(t, V.next)
  for _, b in ipairs(bookings(V)) do
    if b >= t + V.spacing then break end
    if b > t - V.spacing then t = b + V.spacing end
  end
  return t
end

-- Take the slot at ``at`` at level V: its next when it is the first free one
-- (the gap before it, from now or the level's next, is less than a slot), else
-- a booking.
local function take(V, at, now)
  if at < math.max(V.next, now) + V.spacing then
    V.next = at + V.spacing
    save_level(V, now)
  else
    redis.call('ZADD', V.booked_key, at, string.format('%.0f', at))
    redis.call('PEXPIRE', V.booked_key, math.ceil(at - now) + KEEP_MS)
    if redis.call('PTTL', V.key) < at - now + KEEP_MS then
      redis.call('PEXPIRE', V.key, math.ceil(at - now) + KEEP_MS)
    end
  end
  V.booked = nil  -- read again for the next request
end

-- The requests in the order their hosts may take the levels' slots: those with
-- a slot reserved first, then the host served longest ago (its pace's next
-- the soonest), so that hosts of many shards leased together keep their turns
-- (a lease names them in its shards' order). Answers go back in the items' order.
local order = {}
for i = 1, #L - 4, 5 do
  local f = redis.call('HMGET', A.pace_prefix .. L[i], 'next', 'res')
  local served = tonumber(f[1]) or 0
  if served ~= served then served = 0 end  -- (nan: no node writes it)
  order[#order + 1] = {at = i, reserved = f[2] and 0 or 1, served = served}
end
table.sort(order, function(a, b)
  if a.reserved ~= b.reserved then return a.reserved < b.reserved end
  if a.served ~= b.served then return a.served < b.served end
  return a.at < b.at
end)

local slots, missed = {}, 0
for _, item in ipairs(order) do
  local i = item.at
  local n = (i - 1) / 5 + 1
  local host, dom, ip = L[i], L[i + 1], L[i + 2]
  local slot = number_field(P, L[i + 3]) or 0
  local host_interval = number_field(P, L[i + 4]) or 0
  local pace = A.pace_prefix .. host
  local f = redis.call('HMGET', pace, 'next', 'res')
  local host_next, reserved = number_field(P, f[1]) or 0, number_field(P, f[2])
  local host_spacing, window = 0, nil
  if host_interval > 0 then host_spacing, window = spacing_of(P, host_interval) end
  local levels = {}
  if dom ~= '' and P.domain_rate > 0 then
    levels[#levels + 1] = pacing_level(P, P.domain_prefix .. dom, P.domain_rate, now)
  end
  if ip ~= '' and P.ip_rate > 0 then
    levels[#levels + 1] = pacing_level(P, P.ip_prefix .. ip, P.ip_rate, now)
  end
  for _, V in ipairs(levels) do window = window and math.min(window, V.window) or V.window end
  window = window or 0
  local base = math.max(now, slot)
  if reserved and base + early < reserved then
    -- its host's slot is reserved further off (another of its requests)
    slots[n] = string.format('R:%.0f', reserved - early)
  elseif reserved and base <= reserved + window then
    redis.call('HDEL', pace, 'res')  -- the reserved slot, taken
    slots[n] = string.format('%.0f:%.0f', math.max(reserved, base), window)
  else
    if reserved then missed = missed + 1 end
    -- the first time free at every level (a few rounds: each may push it on)
    local at = math.max(base, host_next)
    local settled = false
    for _ = 1, 8 do
      settled = true
      for _, V in ipairs(levels) do
        local free = first_free(V, at)
        if free > at then at, settled = free, false end
      end
      if settled then break end
    end
    if not settled then  -- (levels booked far ahead) after every slot given
      for _, V in ipairs(levels) do
        local booked = bookings(V)
        at = math.max(at, V.next, (booked[#booked] or 0) + V.spacing)
      end
    end
    for _, V in ipairs(levels) do take(V, at, now) end
    local next_time = string.format('%.0f', at + host_spacing)
    if at <= base + lead then
      redis.call('HSET', pace, 'next', next_time)
      if reserved then redis.call('HDEL', pace, 'res') end
      slots[n] = string.format('%.0f:%.0f', at, window)
    else
      redis.call('HSET', pace, 'next', next_time, 'res', string.format('%.0f', at))
      slots[n] = string.format('R:%.0f', at - early)
    end
    redis.call('PEXPIRE', pace, math.ceil(at + host_spacing - now) + KEEP_MS)
  end
end
return {'slots', slots, 'bad', P.bad, 'missed', missed}
