--! include _hooks _entries _crawls
-- A project's piece: the hosts in NAME:first_hosts (a set) go ahead of every
-- other ready group, whatever their order (test_manifest.py's FirstHostsPart).
fill('ready_score', function(F, group, order)
  if redis.call('SISMEMBER', crawl_base(F) .. 'first_hosts', host_part(group)) == 1 then
    return order - 1000 * SEQ_SPAN
  end
  return order
end)
