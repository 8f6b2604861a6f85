-- Sizes of the cluster-wide frontier, in one round trip.
-- KEYS[1]  start URL list
-- KEYS[2]  frontier counters (hash: queued = requests in all group queues)
-- KEYS[3]  node registry (zset)
-- KEYS[4]  dupefilter hash (field 'n' counts its fingerprints)
-- KEYS[5]  dead-letter list
-- KEYS[6]  delayed retries (zset)
-- KEYS[7]  count of fingerprints in the Bloom filter (string; absent in exact mode)
-- ARGV[1]  lease key prefix; a node's leases live at prefix .. node id
-- ARGV[2]  start lease key prefix: entries nodes took and have not queued yet
--          count as start URLs
-- ARGV[3]  the start key's type: list, set or zset
-- KEYS[8]  ready groups (zset)       KEYS[9]  waiting groups (zset)
-- KEYS[10] held groups (zset)        KEYS[11] banned groups (zset)
-- ARGV[4]  now (ms since epoch)
-- KEYS[12] crawls (hash: crawl id -> state)   ARGV[5]  crawl key prefix (NAME:crawl:):
--          a crawl under an id keeps its ready groups in its own zset
-- Returns  {start_urls, queued, in_flight, seen, dlq, delayed, hosts with work, ready
--          hosts, hosts held (backing off, bans included), hosts banned, of the
--          queued those in render groups, of the queued those in MongoDB}
local in_flight = 0
local start_leased = 0
for _, node in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  in_flight = in_flight + redis.call('ZCARD', ARGV[1] .. node)
  start_leased = start_leased + redis.call('LLEN', ARGV[2] .. node)
end
local start_size = {list = 'LLEN', set = 'SCARD', zset = 'ZCARD'}
local ready = redis.call('ZCARD', KEYS[8]) + redis.call('ZCARD', KEYS[8] .. ':render')
for _, crawl in ipairs(redis.call('HKEYS', KEYS[12])) do
  if crawl ~= '*' and crawl ~= '' then
    ready = ready + redis.call('ZCARD', ARGV[5] .. crawl .. ':ready')
      + redis.call('ZCARD', ARGV[5] .. crawl .. ':ready:render')
  end
end
return {
  redis.call(start_size[ARGV[3]] or 'LLEN', KEYS[1]) + start_leased,
  tonumber(redis.call('HGET', KEYS[2], 'queued') or '0'),
  in_flight,
  tonumber(redis.call('HGET', KEYS[4], 'n') or '0') + tonumber(redis.call('GET', KEYS[7]) or '0'),
  redis.call('LLEN', KEYS[5]),
  redis.call('ZCARD', KEYS[6]),
  ready + redis.call('ZCARD', KEYS[9]),
  ready,
  redis.call('ZCOUNT', KEYS[10], ARGV[4], '+inf'),
  redis.call('ZCOUNT', KEYS[11], ARGV[4], '+inf'),
  tonumber(redis.call('HGET', KEYS[2], 'render_queued') or '0'),
  tonumber(redis.call('HGET', KEYS[2], 'spilled') or '0'),
}
