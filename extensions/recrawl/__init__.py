"""Recrawls: keeping a crawl fresh.

Where each part lives:

* ``declared``: its settings with their checks, its keys (``NAME:revisit``,
  ``NAME:due``), its frontier part and middlewares, as the stack reads them;
* ``middleware``: the middleware that keeps pages (intervals, conditional
  requests, change fingerprints), and the one that hashes a page's items;
* ``revisits``: between the middleware and the scheduler (a page's record
  waiting for its lease's release, a failed page's fate, the item fields that
  are not content);
* ``part``: the frontier part (due pages back into the queue each heartbeat; a
  page's record written with its lease's release, or first to MongoDB);
* ``redisstore``: the pages kept in Redis and their feed into the queue
  (``recrawl_feed.lua``, ``recrawl_requeue.lua``); ``statusstore``: their state
  in MongoDB (``RECRAWL_STORE = "mongo"``); ``statuses``: records on their way
  there;
* ``records``: a kept page's revisit record, read defensively; the schedule's
  summary; ``lastmod``: a sitemap's ``<lastmod>`` told to the store.

The commands are ``scrapy recrawl`` and ``scrapy schedule`` (``extensions/commands``:
Scrapy finds a command only in the module that defines it).
"""
