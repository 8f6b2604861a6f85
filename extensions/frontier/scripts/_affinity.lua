--! include _fields _crawls
-- Host affinity (FRONTIER_HOST_AFFINITY): each lease of a host records its node
-- in the host's hash ('aff', 'aff_until', 'aff_paced'), and other nodes leave the
-- host to it while it has been ready less than A.affinity ms (a paced host: past
-- the moment its next slot wakes it, at most one spacing). A paced host waits for
-- its node, which keeps the host's rate alone; an unpaced one goes to a node that
-- has nothing else to do (one more handshake beats an idle node). A dead node's
-- hosts are anyone's. The render lane has none: a browser keeps its own.
local AFFINITY_LOOK = 8  -- ready groups looked at per request wanted, past other nodes'

-- The lease's affinity state. A: affinity (ms; 0 = off), alive_after (ms: older
-- heartbeats mean a dead node), node, host_prefix; K.nodes: the registry.
local function affinity_of(A, K, now)
  return {ms = tonumber(A.affinity or '0') or 0, alive_after = tonumber(A.alive_after or '0') or 0,
          node = A.node, host_prefix = A.host_prefix, nodes = K.nodes, now = now,
          alive = {}, left = 0, taken_over = 0, claims_end = nil}
end

-- Another live node's claim on host: nil, 'paced' (left alone) or 'soft'. The
-- first paced claim to end is H.claims_end: an idle node looks again then.
local function claimed_by_other(H, P, host)
  local f = redis.call('HMGET', H.host_prefix .. host, 'aff', 'aff_until', 'aff_paced')
  local owner = f[1]
  if not owner or owner == H.node then return nil end
  local claim_until = number_field(P, f[2])
  if not claim_until or claim_until <= H.now then return nil end
  local alive = H.alive[owner]
  if alive == nil then
    local beat = tonumber(redis.call('ZSCORE', H.nodes, owner))
    alive = beat ~= nil and beat >= H.alive_after
    H.alive[owner] = alive
  end
  if not alive then return nil end
  if f[3] == '1' then
    if not H.claims_end or claim_until < H.claims_end then H.claims_end = claim_until end
    return 'paced'
  end
  return 'soft'
end

-- The ready groups a lease of want_total looks at: this node's and nobody's
-- (up to want_total), and apart, other nodes' unpaced hosts (H.left counts
-- the groups passed over).
local function candidates_of(H, P, ready, want_total, lane)
  if H.ms <= 0 or lane ~= '' then
    return redis.call('ZRANGE', ready, 0, want_total - 1), {}
  end
  local mine, soft = {}, {}
  for _, group in ipairs(redis.call('ZRANGE', ready, 0, want_total * AFFINITY_LOOK - 1)) do
    if #mine >= want_total then break end
    local claim = claimed_by_other(H, P, host_part(group))
    if not claim then
      mine[#mine + 1] = group
    else
      H.left = H.left + 1
      if claim == 'soft' then soft[#soft + 1] = group end
    end
  end
  return mine, soft
end

-- The host (its hash: counters) is this node's now. A paced one's claim ends
-- past the moment it is ready again (ready_at) by FRONTIER_HOST_AFFINITY or one
-- spacing, whichever is less; an unpaced one's that long after this lease.
local function claim_host(H, counters, lane, ready_at, spacing)
  if H.ms <= 0 or lane ~= '' then return end
  if ready_at then
    redis.call('HSET', counters, 'aff', H.node, 'aff_until',
               math.ceil(ready_at + math.min(H.ms, spacing)), 'aff_paced', 1)
  else
    redis.call('HSET', counters, 'aff', H.node, 'aff_until', H.now + H.ms, 'aff_paced', 0)
  end
end
