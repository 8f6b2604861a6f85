--! include _named
-- Sizes of the cluster-wide frontier, in one round trip.
-- Keys (by name, _named.lua): start_urls; frontier (counters: queued = requests
-- in all group queues); nodes (registry, zset); dupefilter (hash, field 'n'
-- counts its fingerprints); dlq; delayed (retries, zset); bloom_count (the
-- Bloom filter's count, absent in exact mode); ready, waiting, held, banned
-- (groups, zsets); crawls (hash: crawl id -> state).
-- Arguments: leases_prefix (a node's leases live at prefix .. node id);
-- start_leases_prefix (entries nodes took and have not queued yet count as start
-- URLs); start_type (list, set or zset); now (ms since epoch); crawl_prefix
-- (NAME:crawl:: a crawl under an id keeps its ready groups in its own zset).
-- Returns, by name, the fields of results.FrontierSizes: start_urls, queued,
-- in_flight, seen, dlq, delayed, hosts (with work), ready_hosts, held_hosts
-- (backing off, bans included), banned_hosts, render_queued (of the queued,
-- those in render groups), spilled (of the queued, those in MongoDB).
local K, A = named_input(true)
local in_flight = 0
local start_leased = 0
for _, node in ipairs(redis.call('ZRANGE', K.nodes, 0, -1)) do
  in_flight = in_flight + redis.call('ZCARD', A.leases_prefix .. node)
  start_leased = start_leased + redis.call('LLEN', A.start_leases_prefix .. node)
end
local start_size = {list = 'LLEN', set = 'SCARD', zset = 'ZCARD'}
local ready = redis.call('ZCARD', K.ready) + redis.call('ZCARD', K.ready .. ':render')
for _, crawl in ipairs(redis.call('HKEYS', K.crawls)) do
  if crawl ~= '*' and crawl ~= '' then
    ready = ready + redis.call('ZCARD', A.crawl_prefix .. crawl .. ':ready')
      + redis.call('ZCARD', A.crawl_prefix .. crawl .. ':ready:render')
  end
end
return {
  'start_urls', redis.call(start_size[A.start_type] or 'LLEN', K.start_urls) + start_leased,
  'queued', tonumber(redis.call('HGET', K.frontier, 'queued') or '0'),
  'in_flight', in_flight,
  'seen', tonumber(redis.call('HGET', K.dupefilter, 'n') or '0')
    + tonumber(redis.call('GET', K.bloom_count) or '0'),
  'dlq', redis.call('LLEN', K.dlq),
  'delayed', redis.call('ZCARD', K.delayed),
  'hosts', ready + redis.call('ZCARD', K.waiting),
  'ready_hosts', ready,
  'held_hosts', redis.call('ZCOUNT', K.held, A.now, '+inf'),
  'banned_hosts', redis.call('ZCOUNT', K.banned, A.now, '+inf'),
  'render_queued', tonumber(redis.call('HGET', K.frontier, 'render_queued') or '0'),
  'spilled', tonumber(redis.call('HGET', K.frontier, 'spilled') or '0'),
}
