-- A script's keys and arguments by name (redisops.run_named): ARGV[1] names the
-- keys in KEYS' order and ARGV[2] the arguments that follow it (each a
-- comma-separated list); what comes after them is the script's list of items.
-- K.name is a key, A.name an argument (a string, as Redis passes them), L the
-- items. A result by name is a flat list of name, value pairs (redisops.fields).
-- named_input(true): A.now is Redis's own clock (TIME, in ms), whatever the
-- node passed, for the scripts that judge leases and deadlines (lease, reclaim,
-- start_lease, frontier, recrawl_feed, the overflow's), each shard's own on a
-- Redis Cluster. The politeness scripts take the moment the node gives: its
-- clock plus its measured offset from Redis's (extensions/clock.py), so the same
-- clock; their evidence has a moment of its own, and their tests move it by hand.
local function named_input(redis_clock)
  local K, A, L = {}, {}, {}
  local i = 0
  for name in string.gmatch(ARGV[1], '[^,]+') do
    i = i + 1
    K[name] = KEYS[i]
  end
  local j = 2
  for name in string.gmatch(ARGV[2], '[^,]+') do
    j = j + 1
    A[name] = ARGV[j]
  end
  for k = j + 1, #ARGV do
    L[#L + 1] = ARGV[k]
  end
  if redis_clock and A.now ~= nil then
    local time = redis.call('TIME')
    A.now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return K, A, L
end
