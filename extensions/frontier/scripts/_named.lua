-- A script's keys and arguments by name (redisops.run_named): ARGV[1] names the
-- keys in KEYS' order (comma-separated), the rest of ARGV is name, value pairs.
-- K.name is a key, A.name an argument (a string, as Redis passes them). A
-- result by name is a flat list of name, value pairs (redisops.fields reads it).
local function named_input()
  local K, A = {}, {}
  local i = 0
  for name in string.gmatch(ARGV[1], '[^,]+') do
    i = i + 1
    K[name] = KEYS[i]
  end
  for j = 2, #ARGV - 1, 2 do
    A[ARGV[j]] = ARGV[j + 1]
  end
  return K, A
end
