--! include _named
-- Pages fetched, told as crawl.pages events: a batch of the pages the nodes
-- pushed (each with the flush that released its lease), an event per crawl id,
-- put in the outbox in the same step that takes them, so each page is in one
-- event whichever node bundles it. A batch goes when it is full, when its
-- oldest page has waited long enough, or when asked (a closing node).
-- Keys (by name, _named.lua): pages (NAME:webhooks:pages, list), outbox
-- (NAME:webhooks, stream), dead (NAME:webhooks:dead).
-- Arguments: batch, now (ms), wait (ms), force ("1": whatever is there),
-- spider, timestamp (ISO 8601, the events').
-- Items: the URLs told.
-- Returns, by name: told (events), pages, refused (entries that are no page:
-- kept in dead with the reason).
local K, A, L = named_input()
local count = redis.call('LLEN', K.pages)
local batch = tonumber(A.batch)
if count == 0 then return {'told', 0, 'pages', 0, 'refused', 0} end
if count < batch and A.force ~= '1' then
  local ok, first = pcall(cjson.decode, redis.call('LINDEX', K.pages, 0))
  local at = ok and type(first) == 'table' and tonumber(first.at) or 0
  if tonumber(A.now) - at < tonumber(A.wait) then
    return {'told', 0, 'pages', 0, 'refused', 0}
  end
end
local entries = redis.call('LRANGE', K.pages, 0, batch - 1)
redis.call('LTRIM', K.pages, #entries, -1)
local by_crawl, order, raws = {}, {}, {}
local refused, pages = 0, 0
for _, raw in ipairs(entries) do
  local ok, page = pcall(cjson.decode, raw)
  if ok and type(page) == 'table' and type(page.url) == 'string' then
    local crawl = type(page.crawl) == 'string' and page.crawl or ''
    if not by_crawl[crawl] then
      by_crawl[crawl], raws[crawl] = {}, {}
      order[#order + 1] = crawl
    end
    table.insert(by_crawl[crawl], {url = page.url, dead_lettered = page.dead_lettered == true})
    table.insert(raws[crawl], raw)
    pages = pages + 1
  else
    refused = refused + 1
    redis.call('LPUSH', K.dead, cjson.encode({type = 'crawl.pages', error = 'not a page',
                                              body = string.sub(raw, 1, 10000)}))
  end
end
for _, crawl in ipairs(order) do
  local told = by_crawl[crawl]
  local dead = 0
  for _, page in ipairs(told) do
    if page.dead_lettered then dead = dead + 1 end
  end
  local id = 'evt_' .. string.sub(redis.sha1hex(A.spider .. '\0' .. crawl .. '\0' ..
                                                table.concat(raws[crawl], '\n')), 1, 24)
  local body = cjson.encode({type = 'crawl.pages', timestamp = A.timestamp, data = {
    id = id, spider = A.spider, crawl = (crawl ~= '' and crawl) or cjson.null,
    figures = {pages = #told, dead_lettered = dead}, pages = told}})
  for i = 1, #L do
    redis.call('XADD', K.outbox, '*', 'id', id, 'type', 'crawl.pages', 'url', L[i],
               'body', body, 'attempt', '0')
  end
end
return {'told', #order, 'pages', pages, 'refused', refused}
