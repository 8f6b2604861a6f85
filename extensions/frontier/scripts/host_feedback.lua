-- What hosts answered, from one node: pushbacks hold a group for every node and
-- lower its adaptive rate; good answers raise that rate again, step by step.
-- KEYS[1]  ready groups (zset)      KEYS[2]  waiting groups (zset)
-- KEYS[3]  rates (hash: group or '*' -> requests per second)
-- KEYS[4]  held groups (zset -> hold end, ms)   KEYS[5]  of those, banned ones
-- (each group's host hash, ARGV[2] .. GROUP: hold, why, strikes, pushed, next,
--  arate, peak, changed, lat, lat_min, pushbacks, bans, refused and run (the
--  current run of refusals: when it began, how many), orate, win, wl)
-- ARGV[1]  now (ms since epoch)     ARGV[2]  host hash key prefix
-- ARGV[3]  HOST_BACKOFF_BASE (ms)   ARGV[4]  HOST_BACKOFF_MAX (ms)
-- ARGV[5]  HOST_BACKOFF_FORGIVE (ms): one strike forgiven per this much quiet
-- ARGV[6]  1 = adaptive rate on     ARGV[7]  its floor (requests/s)
-- ARGV[8]  (unused)                 ARGV[9]  ms between two raises
-- ARGV[10] the fraction a raise adds
-- ARGV...  events from ARGV[11], five fields each: group, kind ('push', 'ban',
--          'errors', 'again': a request refused again after it waited for its
--          host, which says more of the page than of the host (only its
--          Retry-After holds) unless it is one of a run (RUN_COUNT), or 'ok'), Retry-After in ms (-1: none; for 'ok' the
--          answers counted), the mean latency in ms ('ok'), a random fraction in
--          [0, 1) for the jitter of the hold
-- Returns  {{group, hold until (ms), reason, adaptive rate or ''} for each group
--          held or slowed by these events, malformed host fields ignored}
local now = tonumber(ARGV[1])
local host_prefix = ARGV[2]
local base, cap, forgive = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local adaptive = ARGV[6] == '1'
local floor_rate = tonumber(ARGV[7])
local step, raise = tonumber(ARGV[9]), tonumber(ARGV[10])
local P = {bad = 0}
-- RUN_COUNT refusals within RUN_MS are the host's, not a page's
local RUN_MS, RUN_COUNT = 1000, 4
local ECHO_MS = 500  -- an echo's Retry-After that extends a hold by less is not reported
local default_rate = number_field(P, redis.call('HGET', KEYS[3], '*')) or 0
local out = {}

local function configured_rate(group)
  return number_field(P, redis.call('HGET', KEYS[3], group)) or default_rate
end

local function pushed_back(group, kind, retry_after, jitter)
  local key = host_prefix .. group
  redis.call('HINCRBY', key, kind == 'ban' and 'bans' or 'pushbacks', 1)
  -- a page refused again says more of the page than of the host, unless the
  -- host refuses many at once (RUN_COUNT within RUN_MS): then it is a pushback
  local run = redis.call('HMGET', key, 'refused', 'run')
  local since, count = number_field(P, run[1]), number_field(P, run[2]) or 0
  if since and now - since < RUN_MS then
    count = count + 1
  else
    since, count = now, 1
  end
  redis.call('HSET', key, 'refused', since, 'run', count)
  if kind == 'again' and count >= RUN_COUNT then
    kind = 'push'
  end
  local f = redis.call('HMGET', key, 'hold', 'strikes', 'pushed', 'next', 'arate', 'orate',
                       'win', 'wl', 'leased')
  local hold = number_field(P, f[1]) or 0
  local strikes = math.floor(number_field(P, f[2]) or 0)
  local pushed = number_field(P, f[3]) or 0
  local arate = number_field(P, f[5])
  local wait = nil
  if retry_after >= 0 then
    wait = math.min(retry_after, cap)
  end
  if now < hold or kind == 'again' then
    -- the echo of a pushback already answered (requests that were on the wire
    -- then), or a page refused again: no strike, no lower rate; a Retry-After
    -- that asks for longer holds
    if wait and now + wait > hold then
      local longer = now + wait > hold + ECHO_MS
      hold = now + wait
      redis.call('HSET', key, 'hold', hold, 'next', hold)
      redis.call('ZREM', KEYS[1], group)
      redis.call('ZADD', KEYS[2], 'GT', hold, group)
      redis.call('ZADD', KEYS[4], 'GT', hold, group)
      if longer then  -- said; a few ms more are not worth a line
        out[#out + 1] = {group, string.format('%.0f', hold), kind, arate or ''}
      end
    end
    return
  end
  if strikes > 0 and forgive > 0 then
    strikes = math.max(strikes - math.floor((now - pushed) / forgive), 0)
  end
  strikes = strikes + 1
  if not wait then
    -- exponential from the base, with equal jitter: half of it, plus up to half
    local full = math.min(cap, base * 2 ^ math.min(strikes - 1, 40))
    wait = full / 2 + full / 2 * jitter
  end
  hold = now + wait
  local fields = {'hold', string.format('%.0f', hold), 'why', kind, 'strikes', strikes,
                  'pushed', now}
  -- halved: its adaptive rate, else (a first pushback) what it was leased at
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
    arate = math.max(floor_rate, current / 2)
    for _, v in ipairs({'arate', arate, 'peak', current, 'changed', now}) do
      fields[#fields + 1] = v
    end
  end
  local next_slot = math.max(number_field(P, f[4]) or 0, hold)
  fields[#fields + 1] = 'next'
  fields[#fields + 1] = string.format('%.0f', next_slot)
  redis.call('HSET', key, unpack(fields))
  -- the group waits for every node, even with no work now: a request found
  -- meanwhile waits too
  redis.call('ZREM', KEYS[1], group)
  redis.call('ZADD', KEYS[2], 'GT', hold, group)
  redis.call('ZADD', KEYS[4], 'GT', hold, group)
  if kind == 'ban' then
    redis.call('ZADD', KEYS[5], 'GT', hold, group)
  else
    redis.call('ZREM', KEYS[5], group)
  end
  out[#out + 1] = {group, string.format('%.0f', hold), kind, arate or ''}
end

local function answered_well(group, answers, latency)
  local key = host_prefix .. group
  local f = redis.call('HMGET', key, 'arate', 'peak', 'changed', 'pushed', 'lat_min', 'strikes',
                       'hold')
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
  -- held down while the host's latency climbs
  if latency > 2 * best and latency > 50 then return end
  local rate = configured_rate(group)
  -- a tenth more each step up to the rate it last pushed back at, a twentieth
  -- past it; and each step of good answers forgives a strike
  local by = raise / 2
  if arate < peak then by = raise end
  local new = arate * (1 + by)
  local strikes = math.floor(number_field(P, f[6]) or 0)
  if strikes > 0 then
    strikes = strikes - 1
    redis.call('HSET', key, 'strikes', strikes)
  end
  -- a host without a rate of its own keeps the rate it learned until it goes
  -- well past where it pushed back, all its strikes forgiven
  if (rate > 0 and new >= rate) or (rate <= 0 and strikes == 0 and new >= 4 * peak) then
    -- back to its configured rate (or, without one, unlimited): no longer watched
    redis.call('HDEL', key, 'arate', 'peak', 'changed')
    out[#out + 1] = {group, '0', 'restored', ''}
    return
  end
  redis.call('HSET', key, 'arate', new, 'changed', now)
end

for i = 11, #ARGV, 5 do
  local group, kind = ARGV[i], ARGV[i + 1]
  local value, latency, jitter = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  if kind == 'ok' then
    answered_well(group, value, latency)
  else
    pushed_back(group, kind, value, jitter)
  end
end
-- holds that are over leave the registries (what is left is what holds now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
return {out, P.bad}
