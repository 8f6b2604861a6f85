--! include _named _pacing
-- A sharded frontier's hosts held for their own refusals, told to their
-- addresses (host_feedback.lua names them: the addresses are not in the hosts'
-- shards): a second host of an address held within the window holds the
-- address and halves its rate (_pacing.lua refused_at_address).
-- Keys: rates (the crawl's, unread: it names the addresses' slot for a Redis
-- Cluster). Arguments: now (ms), window (HOST_BACKOFF_WINDOW, ms), ip_prefix (the
-- addresses' key prefix, claim_levels.lua's). Items, four a host: group,
-- address, hold until (ms), reason.
-- Returns how many were told
local _, A, L = named_input()
local now, window = tonumber(A.now), math.max(tonumber(A.window), 1000)
local told = 0
for i = 1, #L - 3, 4 do
  local hold = tonumber(L[i + 2])
  if hold and string.find(L[i + 1], '^[%x:%.]+$') and #L[i + 1] <= 45 then
    refused_at_address(A.ip_prefix .. L[i + 1], L[i], hold, L[i + 3], now, window)
    told = told + 1
  end
end
return told
