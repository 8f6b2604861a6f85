--! include _named
-- Learn, for one host, which query parameters never change its pages: the
-- evidence is pairs of fetched URLs that differ only in one parameter (its
-- value, or its being there at all) and whose content digests are equal. A
-- parameter seen on `needed` such pairs is learned (dropped by every node's
-- normalizer from then on); one pair whose contents differ undoes it for good.
-- Keys (by name, _named.lua): decisions (NAME:params:HOST, hash: parameter ->
-- equal pairs seen, or -1: it changed a page), pairs (NAME:params:HOST:pairs,
-- hash: the evidence, 8 bytes of the URL without the parameter and its name ->
-- 4 bytes of its value and the page's digest; '\0' as the name: the URL
-- itself), hosts (NAME:params:hosts, set: hosts with a decision), changes
-- (NAME:params:learned, stream: host, parameter, state, for every node).
-- Arguments: host; digest (the page's content digest); self (8 bytes: the
-- page's URL); needed; cap (evidence fields a host keeps at most); ttl (ms the
-- evidence is kept after its last write).
-- Items: three per parameter of the page's URL: sibling (8 bytes: the URL
-- without it), its name, 4 bytes of its value.
-- Returns, by name: learned, undone (parameters that changed state), bad
-- (malformed decisions found and reset).
local K, A, L = named_input()
local needed, cap, ttl = tonumber(A.needed), tonumber(A.cap), tonumber(A.ttl)
local digest = A.digest
local learned, undone, bad = {}, {}, 0
local wrote = false

local function remember(field, value)
  if redis.call('HEXISTS', K.pairs, field) == 1 or redis.call('HLEN', K.pairs) < cap then
    redis.call('HSET', K.pairs, field, value .. digest)
    wrote = true
  end
end

local function decided(name, state)
  redis.call('SADD', K.hosts, A.host)
  redis.call('XADD', K.changes, 'MAXLEN', '~', 10000, '*', 'h', A.host, 'p', name, 's', state)
end

-- one pair: the page against what another URL without the parameter had
local function pair(name, witness)
  local raw = redis.call('HGET', K.decisions, name)
  local state = tonumber(raw or '0')
  if raw and (not state or state ~= math.floor(state)) then
    bad = bad + 1  -- not one a node writes: start again
    redis.call('HDEL', K.decisions, name)
    state = 0
  end
  if state < 0 then return end
  if string.sub(witness, 5) == digest then
    state = redis.call('HINCRBY', K.decisions, name, 1)
    if state == needed then
      learned[#learned + 1] = name
      decided(name, state)
    end
  else
    redis.call('HSET', K.decisions, name, -1)
    if state >= needed then
      undone[#undone + 1] = name
      decided(name, -1)
    end
  end
end

for i = 1, #L - 2, 3 do
  local sibling, name, value = L[i], L[i + 1], L[i + 2]
  local field = sibling .. name
  local before = redis.call('HGET', K.pairs, field)
  local again = before and string.sub(before, 1, 4) == value  -- this URL, fetched again
  if not again then
    if before and #before == 4 + #digest then
      pair(name, before)  -- the same URL, another value of the parameter
    end
    local without = redis.call('HGET', K.pairs, sibling .. '\0')
    if without and #without == 4 + #digest then
      pair(name, without)  -- the same URL without the parameter
    end
    remember(field, value)
  end
end
remember(A.self .. '\0', '\0\0\0\0')
if wrote then redis.call('PEXPIRE', K.pairs, ttl) end
return {'learned', learned, 'undone', undone, 'bad', bad}
