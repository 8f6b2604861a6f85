-- Reading what other writers left in a hash: pure (no Redis call), so the
-- politeness law can use it outside Redis too.

-- A number another writer left in a hash, or nil: absent, or malformed (not a
-- finite number >= 0), which is ignored and counted in P.bad.
local function number_field(P, value)
  if not value then return nil end
  local n = tonumber(value)
  if not n or n ~= n or n < 0 or n == math.huge then
    P.bad = P.bad + 1
    return nil
  end
  return n
end

-- Whether a text field another writer left is not of the expected form
-- (counted in P.bad).
local function malformed(P, value, pattern, longest)
  if #value <= longest and string.find(value, pattern) then return false end
  P.bad = P.bad + 1
  return true
end
