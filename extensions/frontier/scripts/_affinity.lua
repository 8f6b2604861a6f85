--! include _fields _crawls
-- Host affinity (FRONTIER_HOST_AFFINITY): a host is the node's that leased it
-- last, for AFFINITY_TTL_MS (its connection is kept alive there, its TLS session
-- resumable). Other nodes pass over a host that is another live node's while
-- they have work of their own, until it has waited for that node A.affinity ms
-- from the first time one of them passed it over; then the next of them takes
-- it, and it is that node's. A node that is late so long is busy (its backlog
-- full, say). A node that would otherwise get nothing waits a lead at most:
-- one more handshake beats an idle node, and a crawl of one host runs on every
-- node. A dead node's hosts are anyone's. The render lane has none: a browser
-- keeps its own connections.
-- Fields of the host's hash: aff (the node), aff_until (when it stops being the
-- node's), aff_wait (when another node first passed it over; 0: none since),
-- aff_more ('1': its node's last lease left work in its queue).
local AFFINITY_LOOK = 8  -- ready groups looked at per request wanted, past other nodes'
local AFFINITY_TTL_MS = 60000  -- within most servers' keep-alive and session lifetime

-- The lease's affinity state. A: affinity (ms; 0 = off), alive_after (ms: older
-- heartbeats mean a dead node), node, host_prefix; K.nodes: the registry.
local function affinity_of(A, K, now)
  return {ms = tonumber(A.affinity or '0') or 0, alive_after = tonumber(A.alive_after or '0') or 0,
          node = A.node, host_prefix = A.host_prefix, nodes = K.nodes, now = now,
          lead = tonumber(A.lead) or 0, alive = {}, left = 0, taken_over = 0, steal = false}
end

-- Whether another live node holds host now; if so, since when another node
-- has waited for it (ms).
local function held_by_other(H, P, host)
  local key = H.host_prefix .. host
  local f = redis.call('HMGET', key, 'aff', 'aff_until', 'aff_wait', 'aff_more')
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
  return true, waited_since, f[4] == '1'
end

-- The ready groups a lease of want_total looks at: this node's and nobody's,
-- and other nodes' that waited for them A.affinity ms, up to want_total (H.left
-- counts those passed over). With H.steal (nothing else to do), other nodes'
-- with work their node left, and the rest once they waited a lead (their node,
-- waking with them, comes first if it can).
-- H.waits_end: the first wait passed over to end, when an idle node looks again.
local function candidates_of(H, P, ready, want_total, lane)
  if H.ms <= 0 or lane ~= '' then
    return redis.call('ZRANGE', ready, 0, want_total - 1)
  end
  local wait = H.steal and math.min(H.ms, H.lead) or H.ms
  local mine = {}
  for _, group in ipairs(redis.call('ZRANGE', ready, 0, want_total * AFFINITY_LOOK - 1)) do
    if #mine >= want_total then break end
    local held, waited_since, more = held_by_other(H, P, host_part(group))
    if held and waited_since + wait > H.now and not (H.steal and more) then
      if not H.steal then H.left = H.left + 1 end
      if not H.waits_end or waited_since + wait < H.waits_end then
        H.waits_end = waited_since + wait
      end
    else
      mine[#mine + 1] = group
    end
  end
  return mine
end

-- The host (its hash: counters) is this node's now, served: the others' wait
-- starts again. more: it has work left that this lease did not take (an unpaced
-- host's share), which a node with nothing else may take at once.
local function claim_host(H, counters, lane, more)
  if H.ms <= 0 or lane ~= '' then return end
  redis.call('HSET', counters, 'aff', H.node, 'aff_until', H.now + AFFINITY_TTL_MS, 'aff_wait', 0,
             'aff_more', more and 1 or 0)
end
