--! include _fields _crawls
-- Host affinity (FRONTIER_HOST_AFFINITY): an unpaced host is the node's that
-- leased it last, for AFFINITY_TTL_MS (its connection is kept alive there, its
-- TLS session resumable). Other nodes pass over a host that is another live node's while
-- they have work of their own, until it has waited for that node A.affinity ms
-- from the first time one of them passed it over; then the next of them takes
-- it, and it is that node's. A node that is late so long is busy (its backlog
-- full, say). A node that would otherwise get nothing takes other nodes' hosts
-- at once: one more handshake beats an idle node, and a crawl of one host runs
-- on every node. A dead node's hosts are anyone's. The render lane has none: a
-- browser keeps its own connections. A paced host has none: between its slots
-- its node is idle as often as any, and idle nodes take it (measured: make
-- bench section 36, more handshakes with affinity than without).
-- Fields of the host's hash: aff (the node), aff_until (when it stops being the
-- node's), aff_wait (when another node first passed it over; 0: none since).
local AFFINITY_LOOK = 8  -- ready groups looked at per request wanted, past other nodes'
local AFFINITY_TTL_MS = 60000  -- within most servers' keep-alive and session lifetime

-- The lease's affinity state. A: affinity (ms; 0 = off), alive_after (ms: older
-- heartbeats mean a dead node), node, host_prefix; K.nodes: the registry.
local function affinity_of(A, K, now)
  return {ms = tonumber(A.affinity or '0') or 0, alive_after = tonumber(A.alive_after or '0') or 0,
          node = A.node, host_prefix = A.host_prefix, nodes = K.nodes, now = now,
          alive = {}, left = 0, taken_over = 0, steal = false}
end

-- Whether another live node holds host now, and its wait has not run out.
local function held_by_other(H, P, host)
  local key = H.host_prefix .. host
  local f = redis.call('HMGET', key, 'aff', 'aff_until', 'aff_wait')
  local owner = f[1]
  if not owner or owner == H.node then return false end
  local held_until = number_field(P, f[2])
  if not held_until or held_until <= H.now then return false end
  local alive = H.alive[owner]
  if alive == nil then
    local beat = tonumber(redis.call('ZSCORE', H.nodes, owner))
    alive = beat ~= nil and beat >= H.alive_after
    H.alive[owner] = alive
  end
  if not alive then return false end
  local waited_since = number_field(P, f[3]) or 0
  if waited_since <= 0 then
    waited_since = H.now
    redis.call('HSET', key, 'aff_wait', waited_since)
  end
  return waited_since + H.ms > H.now  -- past it, its node let it wait: anyone's
end

-- The ready groups a lease of want_total looks at: this node's and nobody's, up
-- to want_total (H.left counts those passed over); with H.steal, any.
local function candidates_of(H, P, ready, want_total, lane)
  if H.ms <= 0 or lane ~= '' or H.steal then
    return redis.call('ZRANGE', ready, 0, want_total - 1)
  end
  local mine = {}
  for _, group in ipairs(redis.call('ZRANGE', ready, 0, want_total * AFFINITY_LOOK - 1)) do
    if #mine >= want_total then break end
    if held_by_other(H, P, host_part(group)) then
      H.left = H.left + 1
    else
      mine[#mine + 1] = group
    end
  end
  return mine
end

-- The host (its hash: counters) is this node's now.
local function claim_host(H, counters, lane)
  if H.ms <= 0 or lane ~= '' then return end
  redis.call('HSET', counters, 'aff', H.node, 'aff_until', H.now + AFFINITY_TTL_MS, 'aff_wait', 0)
end
