-- The core scripts' hook slots. A capability's piece (a part's _*.lua, named by
-- the crawl's manifest: NAME:frontier 'pieces', frontier/manifest.py) comes
-- after the core pieces and fills slots with fill(SLOT, function); the core
-- calls each slot's fills in turn, so a capability adds a piece, never an edit
-- to push, settle or the lease. A slot no piece filled costs a loop over nothing.
--   ready_score(F, group, order) -> order   a ready group's place (each fill
--                                            is given the last one's)
--   budget(F, A, base, limit) -> limit      a group's page budget (likewise)
--   diverted(F, group, score, id, item) -> true when it took a new request
--                                            elsewhere than its group's queue
--   queued(F, group, queue)                 a new request joined its queue
--   taken(F, group)                         a lease took requests from a group
--   emptied(F, group)                       a stopped crawl's group was emptied
--   settled(F)                              once at the end of a script's pushes
local SLOTS = {ready_score = {}, budget = {}, diverted = {}, queued = {}, taken = {},
               emptied = {}, settled = {}}

local function fill(slot, fn)
  local fills = SLOTS[slot]
  if not fills then error('no hook slot named ' .. tostring(slot)) end
  fills[#fills + 1] = fn
end

local function call_each(slot, F, a, b, c)
  for _, fn in ipairs(SLOTS[slot]) do fn(F, a, b, c) end
end

local function ready_score(F, group, order)
  order = tonumber(order)
  for _, fn in ipairs(SLOTS.ready_score) do order = fn(F, group, order) end
  return order
end

local function group_budget(F, A, base, fixed)
  local limit = fixed
  for _, fn in ipairs(SLOTS.budget) do limit = fn(F, A, base, limit) end
  return limit
end

local function diverted(F, group, score, id, item)
  for _, fn in ipairs(SLOTS.diverted) do
    if fn(F, group, score, id, item) then return true end
  end
  return false
end
