--! include _named
-- A crawl's pay-per-crawl ledger (NAME:payments, a hash): its spent:CRAWL,
-- reserved:CRAWL and pages:CRAWL, in millionths of the currency.
-- Keys (by name, _named.lua): ledger.
-- Arguments: op ('reserve', 'settle' or 'release'), crawl (its id; '' = the
-- crawl without one), amount (the price a try reserved), charged (settle: what
-- the site says it charged), budget and currency (reserve: the crawl's budget,
-- and its currency, kept for those who read the ledger).
-- A reservation is taken only while spent + reserved + amount stays within the
-- budget, so nodes paying at once never pass it together; a node that dies
-- between its reserve and its settle leaves the budget smaller, never larger.
-- Returns, by name: ok (1 or 0), left (the budget less spent and reserved).
local K, A = named_input()
local spent_field, reserved_field = 'spent:' .. A.crawl, 'reserved:' .. A.crawl
local spent = tonumber(redis.call('HGET', K.ledger, spent_field) or '0') or 0
local reserved = tonumber(redis.call('HGET', K.ledger, reserved_field) or '0') or 0
local amount = tonumber(A.amount) or 0
local budget = tonumber(A.budget) or 0
if A.op == 'reserve' then
  if amount <= 0 or spent + reserved + amount > budget then
    return {'ok', 0, 'left', budget - spent - reserved}
  end
  redis.call('HINCRBY', K.ledger, reserved_field, amount)
  redis.call('HSET', K.ledger, 'currency', A.currency)
  return {'ok', 1, 'left', budget - spent - reserved - amount}
end
-- settle and release give the reservation back (never below nothing: an entry
-- that claims a reservation it never had frees no one else's)
redis.call('HSET', K.ledger, reserved_field, string.format('%d', math.max(reserved - amount, 0)))
if A.op == 'settle' then
  local charged = tonumber(A.charged) or 0
  if charged > 0 then
    redis.call('HINCRBY', K.ledger, spent_field, charged)
    redis.call('HINCRBY', K.ledger, 'pages:' .. A.crawl, 1)
  end
end
return {'ok', 1, 'left', 0}
