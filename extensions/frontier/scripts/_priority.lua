-- Shared by the scripts that put a request back into the queue: the queue's
-- score (-priority) read from the request JSON itself.
local function priority_score(item)
  local ok, request = pcall(cjson.decode, item)
  if ok and type(request) == 'table' and tonumber(request['priority']) then
    return -tonumber(request['priority'])
  end
  return 0
end
