--! include _named _queues _pacing
-- What hosts answered, from one node. A host is held and slowed for every node
-- only on evidence that the host refuses, not one page: its refusals of
-- distinct pages are surely (Wilson's lower bound) at least SHARE of its recent
-- answers in an exponentially decayed window, at least MIN of them; or, once it
-- has been slowed, a refusal comes past the pace it refused at before (its
-- ceiling, 'peak'), or comes back at that pace soon after. A page refused on
-- its own waits alone (the node's part); its Retry-After holds the host while
-- it runs, no more. Bans and runs of connection errors are the host's. Good
-- answers (reported once a second for watched hosts) raise the adaptive rate
-- back: fast towards the ceiling, by 1 % of it close to it, then, after quiet,
-- in probing steps that grow while no refusal comes.
-- Keys (by name, _named.lua): ready, waiting (groups, zsets); rates (hash:
-- group or '*' -> requests per second); held (groups, zset -> hold end, ms);
-- banned (of those, the banned ones); holds (a stream: each hold set here, g =
-- group, u = its end in ms, for the nodes to hear of; the last HOLDS_KEPT or so).
-- (with CLUSTER_IP_RATE, the address level ip_prefix .. ADDRESS: next, cut, why;
--  and ADDRESS:refused, a zset: its hosts held lately)
-- (each group's host hash, host_prefix .. GROUP: hold, why, strikes, pushed, next,
--  arate, peak, changed, cutat, probe, cut, lat, lat_min, pushbacks, page_refusals,
--  bans; the evidence: en, er (decayed answers and refusals), et (when they
--  were decayed to), e0 (when it began), an (answers counted), rl and rn
--  (when the last refusal counted came, an then), ew (watched until); the
--  observed lease rate: orate, win, wl, leased)
-- Arguments:
--   now           ms since epoch          host_prefix  host hash key prefix
--   base, cap     HOST_BACKOFF_BASE and HOST_BACKOFF_MAX (ms)
--   forgive       HOST_BACKOFF_FORGIVE (ms): one strike forgiven per this much quiet
--   adaptive      1 = adaptive rate on    floor_rate   its floor (requests/s)
--   window        HOST_BACKOFF_WINDOW (ms): the evidence window's time constant
--   step          ms between two raises   raise        the fraction a recovering raise adds
--   share         HOST_BACKOFF_SHARE      min_refusals HOST_BACKOFF_MIN_REFUSALS
--   ip_prefix     the address levels' key prefix (lease.lua)
--   levels_apart  '1' for a sharded frontier: the addresses are another slot's
-- Items: the events, six each: group; kind ('push': a page refused for the
-- first time lately; 'again': a page refused again, which says more of the page
-- than of the host; 'ban'; 'errors'; 'ok'); Retry-After in ms (-1: none; for
-- 'ok' the answers counted); the mean latency in ms ('ok'); a random fraction
-- in [0, 1) for the jitter of the hold; the answers of the host the node saw
-- and did not report yet (its own recent history, decayed to now).
-- Returns, by name: held ({group, hold until (ms), reason, adaptive rate or ''}
-- for each group held or slowed by these events), bad (malformed host fields
-- ignored), address_refused (with levels_apart: {group, address, hold until
-- (ms), reason} of each host held, for address_cut.lua)
local HOLDS_KEPT = 1000  -- holds set faster than nodes poll them are left to the leases
local K, A, E = named_input()
local now = tonumber(A.now)
local host_prefix = A.host_prefix
local base, cap, forgive = tonumber(A.base), tonumber(A.cap), tonumber(A.forgive)
local adaptive = A.adaptive == '1'
local floor_rate = tonumber(A.floor_rate)
local window = math.max(tonumber(A.window), 1000)
local step, raise = tonumber(A.step), tonumber(A.raise)
local share, min_refusals = tonumber(A.share), tonumber(A.min_refusals)
local P = {bad = 0}
local WATCH = 3  -- windows a host stays watched after a refusal
local ECHO_MS = 500  -- an echo's Retry-After that extends a hold by less is not reported
local default_rate = number_field(P, redis.call('HGET', K.rates, '*')) or 0
read_level_rates(P, K.rates)
local out = {}
-- With CLUSTER_IP_RATE, a host held on evidence of its own is evidence against
-- its address (_pacing.lua refused_at_address); with levels_apart (a sharded
-- frontier) the address is another slot's: it is named for the node to tell.
local apart = {}
local function address_refused(group, hold, kind)
  if P.ip_rate <= 0 or not A.ip_prefix then return end
  local ip = redis.call('HGET', host_prefix .. group, 'ip')
  -- (no address or a failed lookup: no level to slow; one no node writes is counted)
  if not ip or ip == '' or ip == '?' or ip == '-' then return end
  if malformed(P, ip, '^[%x:%.]+$', 45) then return end
  if A.levels_apart == '1' then
    apart[#apart + 1] = {group, ip, string.format('%.0f', hold), kind}
    return
  end
  refused_at_address(A.ip_prefix .. ip, group, hold, kind, now, window)
end

local function configured_rate(group)
  return number_field(P, redis.call('HGET', K.rates, group)) or default_rate
end

local function fmt(n) return string.format('%.3f', n) end

-- the evidence, decayed to now: answers and refusals in the window
local function evidence(en, er, et)
  en, er = number_field(P, en) or 0, number_field(P, er) or 0
  et = number_field(P, et)
  if et and now > et then
    local k = math.exp(-(now - et) / window)
    en, er = en * k, er * k
  end
  return en, er
end

-- Whether refused of answered is surely (99 %, one-sided) at least the share:
-- the lower bound of Wilson's score interval. Four refusals in eight answers
-- are; four in sixty (a site whose pages fail 2 % of the time, unlucky) are not.
local Z = 2.33
local function surely_above(refused, answered, at_least)
  if answered <= 0 then return false end
  local p, z2 = math.min(refused / answered, 1), Z * Z
  local centre = p + z2 / (2 * answered)
  local margin = Z * math.sqrt(p * (1 - p) / answered + z2 / (4 * answered * answered))
  return (centre - margin) / (1 + z2 / answered) >= at_least
end

-- a Retry-After that asks for longer than the host is held holds it that long
local function hold_for(key, group, hold, wait, kind, arate)
  if not wait or now + wait <= hold then return end
  local longer = now + wait > hold + ECHO_MS
  hold = now + wait
  redis.call('HSET', key, 'hold', string.format('%.0f', hold), 'next', string.format('%.0f', hold))
  if kind then redis.call('HSET', key, 'why', kind) end
  redis.call('ZREM', K.ready, group)
  redis.call('ZADD', K.waiting, 'GT', hold, group)
  redis.call('ZADD', K.held, 'GT', hold, group)
  if longer then  -- said; a few ms more are not worth a line
    out[#out + 1] = {group, string.format('%.0f', hold), kind or 'echo', arate and fmt(arate) or ''}
  end
end

local function refused(group, kind, retry_after, jitter, history)
  local key = host_prefix .. group
  local f = redis.call('HMGET', key, 'hold', 'strikes', 'pushed', 'next', 'arate', 'orate',
                       'win', 'wl', 'leased', 'en', 'er', 'et', 'cutat', 'e0', 'why')
  local hold = number_field(P, f[1]) or 0
  local arate = number_field(P, f[5])
  local cutat = number_field(P, f[13]) or 0
  local wait = nil
  if retry_after >= 0 then
    wait = math.min(retry_after, cap)
  end
  -- refusals of requests sent at the old pace, before the rate was cut (on
  -- the wire then, or leased ahead) are echoes: no evidence, no strike
  local echo_after = 2000
  if arate and arate > 0 then echo_after = math.max(echo_after, 2000 / arate) end
  local echo = now - cutat < echo_after
  local en, er = evidence(f[10], f[11], f[12])
  -- when this stretch of evidence began (what decayed away ended the last)
  local e0 = number_field(P, f[14])
  if not e0 or en < 0.5 then
    e0 = now
    redis.call('HSET', key, 'e0', e0)
  end
  en = en + history
  local host_level = kind == 'ban' or kind == 'errors'
  -- every answer counted (refusals included): how many came between two refusals
  local answered = redis.call('HINCRBYFLOAT', key, 'an', history + 1)
  if kind == 'push' and not echo then
    en, er = en + 1, er + 1
    -- (decayed counts: four refusals a few ms apart are 3.999)
    if er >= min_refusals - 0.05 and surely_above(er, en, share) then
      host_level = true
    end
  end
  if (kind == 'push' or kind == 'again') and arate and not echo and not host_level then
    -- a slowed host refused past the pace it refused at before (probing), or
    -- again at that pace soon after (within 4 / SHARE answers): the host (a page
    -- refused again counts here: at the pace a limiter was found at, it
    -- refuses what it refused before); a first refusal at a lower pace makes
    -- that pace its ceiling
    local g = redis.call('HMGET', key, 'peak', 'rn')
    local peak, last = number_field(P, g[1]), number_field(P, g[2])
    if peak and arate > 1.001 * peak then
      host_level = true  -- probing past where it refused before: found again
      kind = 'push'
    elseif peak and last and arate >= 0.99 * peak and answered - last <= 4 / share then
      host_level = true
      kind = 'push'  -- the host's refusal, whichever page it fell on
    elseif peak and arate > 0.905 * peak then
      -- climbed back close to its ceiling (a cut leaves it at 90 % at most):
      -- the limiter again, whichever page it fell on
      host_level = true
      kind = 'push'
    elseif not peak or arate < peak then
      redis.call('HSET', key, 'peak', fmt(arate), 'probe', 0)
    end
  end
  if (kind == 'push' or (kind == 'again' and arate)) and not echo then
    redis.call('HSET', key, 'rl', now, 'rn', answered)
  end
  redis.call('HSET', key, 'en', fmt(en), 'er', fmt(er), 'et', now)
  if kind == 'push' or kind == 'again' then
    redis.call('HSET', key, 'ew', now + WATCH * window)
  end
  -- the echo of a hold of the host's, already answered (a page's Retry-After
  -- holds too, but the refusals it meets still tell of the host). A ban or
  -- errors after the hold are the host's again, however soon after a cut: a
  -- ban page is never an echo of a pace
  local host_held = now < hold and f[15] ~= 'retry-after'
  if host_level and host_held then
    host_level = false
  end
  if not host_level then
    if kind == 'push' or kind == 'again' then redis.call('HINCRBY', key, 'page_refusals', 1) end
    local why = nil  -- a hold already running keeps its reason
    if hold <= now then why = 'retry-after' end
    hold_for(key, group, hold, wait, why, arate)
    return
  end
  redis.call('HINCRBY', key, kind == 'ban' and 'bans' or 'pushbacks', 1)
  local strikes = math.floor(number_field(P, f[2]) or 0)
  local pushed = number_field(P, f[3]) or 0
  if strikes > 0 and forgive > 0 then
    strikes = math.max(strikes - math.floor((now - pushed) / forgive), 0)
  end
  strikes = strikes + 1
  if not wait then
    -- exponential from the base, with equal jitter: half of it, plus up to half
    local full = math.min(cap, base * 2 ^ math.min(strikes - 1, 40))
    wait = full / 2 + full / 2 * jitter
  end
  hold = math.max(hold, now + wait)
  -- the evidence it was decided on, for a person: pages refused / answers
  local fields = {'hold', string.format('%.0f', hold), 'why', kind, 'strikes', strikes,
                  'pushed', now, 'cut', string.format('%.0f/%.0f', er, en)}
  -- cut from: its adaptive rate, else (a first pushback) what it was leased at
  -- lately, else its own rate; a host with neither (a pushback in its first
  -- seconds) is only held, and slowed at its next pushback
  local rate = configured_rate(group)
  -- what it was leased at lately: since the current window began, once that is a
  -- second old, else over the last window; in its first second, over a second
  -- (a first burst is not a rate)
  local observed = number_field(P, f[6])
  local since = number_field(P, f[7])
  if since and (now - since >= 1000 or not observed) then
    local at_start = number_field(P, f[8]) or 0
    observed = ((number_field(P, f[9]) or 0) - at_start) * 1000 / math.max(now - since, 1000)
  end
  local current = arate
  if not current then
    current = (observed and observed > 0 and observed) or (rate > 0 and rate) or nil
  end
  if current and rate > 0 then current = math.min(current, rate) end
  if adaptive and current then
    -- the cut, and the ceiling ('peak') it climbs back towards: a ban or errors
    -- halve it, its ceiling where it was; a slowed host that refuses again is
    -- cut by 15 %, its ceiling the pace it refused at (probing past it: the
    -- pace before the probe's last step, which it took); a first cut goes by
    -- the share refused (15 % at least, half at most) and to no more than the
    -- good answers the host gave in the window (its Retry-After holds
    -- included), its ceiling what the host took of what it was sent
    local peak = current
    if kind ~= 'push' then
      arate = current / 2
    elseif number_field(P, f[5]) then
      arate = current * 0.85
      -- refused while probing past its ceiling: the host took the pace before
      -- this probe's step (answered_well), not this one
      local g = redis.call('HMGET', key, 'peak', 'probe')
      local old_peak, probe = number_field(P, g[1]), math.floor(number_field(P, g[2]) or 0)
      if old_peak and current > old_peak and probe > 0 then
        peak = math.max(old_peak, current / (1 + math.min(0.01 * 2 ^ (probe - 1), 0.5)))
      end
    else
      local refused_share = en > 0 and math.min(er / en, 1) or 1
      peak = current * (1 - refused_share)
      arate = current * math.min(math.max((1 - refused_share) * 0.9, 0.5), 0.85)
      local span = window * (1 - math.exp(-math.max(now - e0, 2000) / window))
      arate = math.min(arate, (en - er) * 1000 / span)
    end
    arate = math.max(floor_rate, arate)
    peak = math.max(peak, arate)
    -- refusals from now on are evidence at the new pace
    for _, v in ipairs({'arate', fmt(arate), 'peak', fmt(peak), 'changed', now, 'cutat', now,
                        'probe', 0, 'er', 0}) do
      fields[#fields + 1] = v
    end
  end
  local next_slot = math.max(number_field(P, f[4]) or 0, hold)
  fields[#fields + 1] = 'next'
  fields[#fields + 1] = string.format('%.0f', next_slot)
  redis.call('HSET', key, unpack(fields))
  -- the group waits for every node, even with no work now: a request found
  -- meanwhile waits too
  redis.call('ZREM', K.ready, group)
  redis.call('ZADD', K.waiting, 'GT', hold, group)
  redis.call('ZADD', K.held, 'GT', hold, group)
  if kind == 'ban' then
    redis.call('ZADD', K.banned, 'GT', hold, group)
  else
    redis.call('ZREM', K.banned, group)
  end
  out[#out + 1] = {group, string.format('%.0f', hold), kind, arate and fmt(arate) or ''}
  address_refused(group, hold, kind)
end

local function answered_well(group, answers, latency)
  local key = host_prefix .. group
  local f = redis.call('HMGET', key, 'arate', 'peak', 'changed', 'pushed', 'lat_min', 'strikes',
                       'hold', 'en', 'er', 'et', 'rl', 'probe')
  local en, er = evidence(f[8], f[9], f[10])
  redis.call('HSET', key, 'en', fmt(en + answers), 'er', fmt(er), 'et', now)
  redis.call('HINCRBYFLOAT', key, 'an', answers)
  local arate = number_field(P, f[1])
  if not arate then return end  -- not slowed: nothing to raise
  local peak = number_field(P, f[2]) or arate
  local changed = number_field(P, f[3]) or 0
  local pushed = number_field(P, f[4]) or 0
  -- the best latency seen lately (it drifts up, so an old best is forgotten)
  local best = number_field(P, f[5])
  best = best and math.min(best * 1.02, latency) or latency
  redis.call('HSET', key, 'lat', latency, 'lat_min', best)
  -- answers that come during a hold were sent before it: no raise for them
  if now < (number_field(P, f[7]) or 0) then return end
  if now - changed < step or now - pushed < step then return end
  -- refused lately: no faster than where it refused, for ten steps
  local quiet = now - (number_field(P, f[11]) or 0) >= 10 * step
  -- held down while the host's latency climbs
  if latency > 2 * best and latency > 50 then return end
  local rate = configured_rate(group)
  -- far below where it last refused: a quarter more a step, then a tenth; close
  -- to it, 1 % of it a step; there, ten steps with no refusal, then probing:
  -- 1 %, 2 %, 4 %, ... a step (at most half), to find whether the host takes more
  local probe = math.floor(number_field(P, f[12]) or 0)
  local new
  if arate < peak / 2 then
    new = arate * (1 + 2.5 * raise)
  elseif arate < 0.79 * peak then  -- (rates are stored to 3 decimals)
    new = math.min(arate * (1 + raise), 0.8 * peak)
  elseif arate < 0.945 * peak then
    new = math.min(arate + 0.01 * peak, 0.95 * peak)
  elseif not quiet then
    return
  else
    new = arate * (1 + math.min(0.01 * 2 ^ probe, 0.5))
    probe = probe + 1
  end
  -- each step of good answers forgives a strike
  local strikes = math.floor(number_field(P, f[6]) or 0)
  if strikes > 0 then
    strikes = strikes - 1
    redis.call('HSET', key, 'strikes', strikes)
  end
  -- a host without a rate of its own keeps the rate it learned until it goes
  -- well past where it pushed back, all its strikes forgiven
  if (rate > 0 and new >= rate) or (rate <= 0 and strikes == 0 and new >= 4 * peak) then
    -- back to its configured rate (or, without one, unlimited): no longer watched
    redis.call('HDEL', key, 'arate', 'peak', 'changed', 'probe', 'cut', 'cutat')
    out[#out + 1] = {group, '0', 'restored', ''}
    return
  end
  redis.call('HSET', key, 'arate', fmt(new), 'changed', now, 'probe', probe)
end

for i = 1, #E - 5, 6 do  -- the events, six items each
  local group, kind = E[i], E[i + 1]
  local value, latency, jitter = tonumber(E[i + 2]), tonumber(E[i + 3]), tonumber(E[i + 4])
  local history = tonumber(E[i + 5]) or 0
  if history ~= history or history < 0 then history = 0 end
  if kind == 'ok' then
    answered_well(group, value, latency)
  else
    refused(group, kind, value, jitter, history)
  end
end
-- every node hears of a hold at its next poll of the stream, not at its next
-- lease: what it leased before waits with the host instead of going inside the hold
for _, h in ipairs(out) do
  if h[3] ~= 'restored' and tonumber(h[2]) > now then
    redis.call('XADD', K.holds, 'MAXLEN', '~', HOLDS_KEPT, '*', 'g', h[1], 'u', h[2])
  end
end
-- holds that are over leave the registries (what is left is what holds now)
redis.call('ZREMRANGEBYSCORE', K.held, '-inf', now)
redis.call('ZREMRANGEBYSCORE', K.banned, '-inf', now)
return {'held', out, 'bad', P.bad, 'address_refused', apart}
