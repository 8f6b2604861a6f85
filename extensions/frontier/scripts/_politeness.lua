--! include _fields
-- The politeness law: what one answer of a host does to the host's state. Pure:
-- no Redis call, the host's fields in, a decision out; host_feedback.lua reads
-- the host hash, calls it and writes the decision, atomically, and the tests
-- run the same code outside Redis (tests/test_politeness_law.py).
--
-- A host is held and slowed for every node only on evidence that the host
-- refuses, not one page: its refusals of distinct pages are surely (Wilson's
-- lower bound) at least SHARE of its recent answers in an exponentially decayed
-- window, at least MIN of them; or, once it has been slowed, a refusal comes
-- past the pace it refused at before (its ceiling, 'peak'), or comes back at
-- that pace soon after. A page refused on its own waits alone (the node's
-- part); its Retry-After holds the host while it runs, no more. Bans and runs
-- of connection errors are the host's. Good answers raise the adaptive rate
-- back: fast towards the ceiling, by 1 % of it close to it, then, after quiet,
-- in probing steps that grow while no refusal comes.
--
-- s: the host's fields as read (strings or nil; see HOST_FIELDS), and s.rate,
--    its configured rate (requests/s, 0: none)
-- c: now, base, cap, forgive (ms), adaptive (boolean), floor_rate, window,
--    step (ms), raise, share, min_refusals
-- The decision d: d.set (field -> value, to write), d.del (fields to remove),
-- d.incr (counter -> 1), d.an (added to the answers counted), d.hold (the
-- group waits until then, ms), d.banned (true: banned until d.hold, false: no
-- longer), d.out ({hold, reason, adaptive rate or ''}, to report), d.address
-- ({hold, kind}: evidence against the host's address).

local HOST_FIELDS = {'hold', 'strikes', 'pushed', 'next', 'arate', 'orate', 'win', 'wl',
                     'leased', 'en', 'er', 'et', 'cutat', 'e0', 'why', 'peak', 'rn', 'probe',
                     'an', 'changed', 'lat_min', 'rl'}
local WATCH = 3  -- windows a host stays watched after a refusal
local ECHO_MS = 500  -- an echo's Retry-After that extends a hold by less is not reported
-- Wilson's score interval, one-sided 99 %
local Z = 2.33

local function law_fmt(n) return string.format('%.3f', n) end
local function law_ms(n) return string.format('%.0f', n) end

-- the evidence, decayed to now: answers and refusals in the window
local function law_evidence(P, c, en, er, et)
  en, er = number_field(P, en) or 0, number_field(P, er) or 0
  et = number_field(P, et)
  if et and c.now > et then
    local k = math.exp(-(c.now - et) / c.window)
    en, er = en * k, er * k
  end
  return en, er
end

-- Whether refused of answered is surely (99 %, one-sided) at least the share:
-- the lower bound of Wilson's score interval. Four refusals in eight answers
-- are; four in sixty (a site whose pages fail 2 % of the time, unlucky) are not.
local function surely_above(refused, answered, at_least)
  if answered <= 0 then return false end
  local p, z2 = math.min(refused / answered, 1), Z * Z
  local centre = p + z2 / (2 * answered)
  local margin = Z * math.sqrt(p * (1 - p) / answered + z2 / (4 * answered * answered))
  return (centre - margin) / (1 + z2 / answered) >= at_least
end

local function law_decision()
  return {set = {}, del = {}, incr = {}, an = 0}
end

-- a Retry-After that asks for longer than the host is held holds it that long
local function law_hold_for(d, c, hold, wait, kind, arate)
  if not wait or c.now + wait <= hold then return end
  local longer = c.now + wait > hold + ECHO_MS
  hold = c.now + wait
  d.set.hold, d.set.next = law_ms(hold), law_ms(hold)
  if kind then d.set.why = kind end
  d.hold = hold
  if longer then  -- said; a few ms more are not worth a line
    d.out = {law_ms(hold), kind or 'echo', arate and law_fmt(arate) or ''}
  end
end

-- kind: 'push' (a page refused for the first time lately), 'again' (a page
-- refused again, which says more of the page than of the host), 'ban' or
-- 'errors'; retry_after in ms (-1: none); jitter in [0, 1); history: the
-- answers of the host the node saw and did not report yet
local function law_refused(P, s, c, kind, retry_after, jitter, history)
  local d = law_decision()
  local now, share = c.now, c.share
  local hold = number_field(P, s.hold) or 0
  local arate = number_field(P, s.arate)
  local cutat = number_field(P, s.cutat) or 0
  local wait = nil
  if retry_after >= 0 then
    wait = math.min(retry_after, c.cap)
  end
  -- refusals of requests sent at the old pace, before the rate was cut (on
  -- the wire then, or leased ahead) are echoes: no evidence, no strike
  local echo_after = 2000
  if arate and arate > 0 then echo_after = math.max(echo_after, 2000 / arate) end
  local echo = now - cutat < echo_after
  local en, er = law_evidence(P, c, s.en, s.er, s.et)
  -- when this stretch of evidence began (what decayed away ended the last)
  local e0 = number_field(P, s.e0)
  if not e0 or en < 0.5 then
    e0 = now
    d.set.e0 = e0
  end
  en = en + history
  local host_level = kind == 'ban' or kind == 'errors'
  -- every answer counted (refusals included): how many came between two refusals
  d.an = history + 1
  local answered = (tonumber(s.an) or 0) + d.an
  if kind == 'push' and not echo then
    en, er = en + 1, er + 1
    -- (decayed counts: four refusals a few ms apart are 3.999)
    if er >= c.min_refusals - 0.05 and surely_above(er, en, share) then
      host_level = true
    end
  end
  if (kind == 'push' or kind == 'again') and arate and not echo and not host_level then
    -- a slowed host refused past the pace it refused at before (probing), or
    -- again at that pace soon after (within 4 / SHARE answers): the host (a page
    -- refused again counts here: at the pace a limiter was found at, it
    -- refuses what it refused before); a first refusal at a lower pace makes
    -- that pace its ceiling
    local peak, last = number_field(P, s.peak), number_field(P, s.rn)
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
      d.set.peak, d.set.probe = law_fmt(arate), 0
    end
  end
  if (kind == 'push' or (kind == 'again' and arate)) and not echo then
    d.set.rl, d.set.rn = now, answered
  end
  d.set.en, d.set.er, d.set.et = law_fmt(en), law_fmt(er), now
  if kind == 'push' or kind == 'again' then
    d.set.ew = now + WATCH * c.window
  end
  -- the echo of a hold of the host's, already answered (a page's Retry-After
  -- holds too, but the refusals it meets still tell of the host). A ban or
  -- errors after the hold are the host's again, however soon after a cut: a
  -- ban page is never an echo of a pace
  local host_held = now < hold and s.why ~= 'retry-after'
  if host_level and host_held then
    host_level = false
  end
  if not host_level then
    if kind == 'push' or kind == 'again' then d.incr.page_refusals = 1 end
    local why = nil  -- a hold already running keeps its reason
    if hold <= now then why = 'retry-after' end
    law_hold_for(d, c, hold, wait, why, arate)
    return d
  end
  d.incr[kind == 'ban' and 'bans' or 'pushbacks'] = 1
  local strikes = math.floor(number_field(P, s.strikes) or 0)
  local pushed = number_field(P, s.pushed) or 0
  if strikes > 0 and c.forgive > 0 then
    strikes = math.max(strikes - math.floor((now - pushed) / c.forgive), 0)
  end
  strikes = strikes + 1
  if not wait then
    -- exponential from the base, with equal jitter: half of it, plus up to half
    local full = math.min(c.cap, c.base * 2 ^ math.min(strikes - 1, 40))
    wait = full / 2 + full / 2 * jitter
  end
  hold = math.max(hold, now + wait)
  -- the evidence it was decided on, for a person: pages refused / answers
  d.set.hold, d.set.why, d.set.strikes, d.set.pushed = law_ms(hold), kind, strikes, now
  d.set.cut = string.format('%.0f/%.0f', er, en)
  -- cut from: its adaptive rate, else (a first pushback) what it was leased at
  -- lately, else its own rate; a host with neither (a pushback in its first
  -- seconds) is only held, and slowed at its next pushback
  local rate = s.rate
  -- what it was leased at lately: since the current window began, once that is a
  -- second old, else over the last window; in its first second, over a second
  -- (a first burst is not a rate)
  local observed = number_field(P, s.orate)
  local since = number_field(P, s.win)
  if since and (now - since >= 1000 or not observed) then
    local at_start = number_field(P, s.wl) or 0
    observed = ((number_field(P, s.leased) or 0) - at_start) * 1000 / math.max(now - since, 1000)
  end
  local current = arate
  if not current then
    current = (observed and observed > 0 and observed) or (rate > 0 and rate) or nil
  end
  if current and rate > 0 then current = math.min(current, rate) end
  if c.adaptive and current then
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
    elseif arate then
      arate = current * 0.85
      -- refused while probing past its ceiling: the host took the pace before
      -- this probe's step (law_answered), not this one
      local old_peak = number_field(P, s.peak)
      local probe = math.floor(number_field(P, s.probe) or 0)
      if old_peak and current > old_peak and probe > 0 then
        peak = math.max(old_peak, current / (1 + math.min(0.01 * 2 ^ (probe - 1), 0.5)))
      end
    else
      local refused_share = en > 0 and math.min(er / en, 1) or 1
      peak = current * (1 - refused_share)
      arate = current * math.min(math.max((1 - refused_share) * 0.9, 0.5), 0.85)
      local span = c.window * (1 - math.exp(-math.max(now - e0, 2000) / c.window))
      arate = math.min(arate, (en - er) * 1000 / span)
    end
    arate = math.max(c.floor_rate, arate)
    peak = math.max(peak, arate)
    -- refusals from now on are evidence at the new pace
    d.set.arate, d.set.peak, d.set.changed, d.set.cutat = law_fmt(arate), law_fmt(peak), now, now
    d.set.probe, d.set.er = 0, 0
  end
  d.set.next = law_ms(math.max(number_field(P, s.next) or 0, hold))
  -- the group waits for every node, even with no work now: a request found
  -- meanwhile waits too
  d.hold = hold
  d.banned = kind == 'ban'
  d.out = {law_ms(hold), kind, arate and law_fmt(arate) or ''}
  d.address = {hold, kind}
  return d
end

-- answers: how many good answers the node reports; latency: their mean (ms)
local function law_answered(P, s, c, answers, latency)
  local d = law_decision()
  local now, step = c.now, c.step
  local en, er = law_evidence(P, c, s.en, s.er, s.et)
  d.set.en, d.set.er, d.set.et = law_fmt(en + answers), law_fmt(er), now
  d.an = answers
  local arate = number_field(P, s.arate)
  if not arate then return d end  -- not slowed: nothing to raise
  local peak = number_field(P, s.peak) or arate
  local changed = number_field(P, s.changed) or 0
  local pushed = number_field(P, s.pushed) or 0
  -- the best latency seen lately (it drifts up, so an old best is forgotten)
  local best = number_field(P, s.lat_min)
  best = best and math.min(best * 1.02, latency) or latency
  d.set.lat, d.set.lat_min = latency, best
  -- answers that come during a hold were sent before it: no raise for them
  if now < (number_field(P, s.hold) or 0) then return d end
  if now - changed < step or now - pushed < step then return d end
  -- refused lately: no faster than where it refused, for ten steps
  local quiet = now - (number_field(P, s.rl) or 0) >= 10 * step
  -- held down while the host's latency climbs
  if latency > 2 * best and latency > 50 then return d end
  local rate = s.rate
  -- far below where it last refused: a quarter more a step, then a tenth; close
  -- to it, 1 % of it a step; there, ten steps with no refusal, then probing:
  -- 1 %, 2 %, 4 %, ... a step (at most half), to find whether the host takes more
  local probe = math.floor(number_field(P, s.probe) or 0)
  local new
  if arate < peak / 2 then
    new = arate * (1 + 2.5 * c.raise)
  elseif arate < 0.79 * peak then  -- (rates are stored to 3 decimals)
    new = math.min(arate * (1 + c.raise), 0.8 * peak)
  elseif arate < 0.945 * peak then
    new = math.min(arate + 0.01 * peak, 0.95 * peak)
  elseif not quiet then
    return d
  else
    new = arate * (1 + math.min(0.01 * 2 ^ probe, 0.5))
    probe = probe + 1
  end
  -- each step of good answers forgives a strike
  local strikes = math.floor(number_field(P, s.strikes) or 0)
  if strikes > 0 then
    strikes = strikes - 1
    d.set.strikes = strikes
  end
  -- a host without a rate of its own keeps the rate it learned until it goes
  -- well past where it pushed back, all its strikes forgiven
  if (rate > 0 and new >= rate) or (rate <= 0 and strikes == 0 and new >= 4 * peak) then
    -- back to its configured rate (or, without one, unlimited): no longer watched
    d.del = {'arate', 'peak', 'changed', 'probe', 'cut', 'cutat'}
    d.out = {'0', 'restored', ''}
    return d
  end
  d.set.arate, d.set.changed, d.set.probe = law_fmt(new), now, probe
  return d
end
