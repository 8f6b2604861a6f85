"""Recrawls: keeping a crawl fresh.

Where each part lives:

* ``records``: a kept page's revisit record, read defensively; the schedule's summary;
* ``revisits``: between the recrawl middleware and the scheduler (a page's record
  waiting for its lease's release, a failed page's fate, the item fields that are
  not content);
* ``statusstore``: the pages' recrawl state in MongoDB (``RECRAWL_STORE = "mongo"``);
* ``lastmod``: a sitemap's ``<lastmod>`` told to the store;
* the middleware that keeps pages (intervals, conditional requests, change
  fingerprints) is ``extensions.downloadermiddlewares.recrawl``; the Redis side
  (``NAME:revisit``, ``NAME:due``, the feed into the queue) is the frontier's
  (``frontier.py``, ``scripts/recrawl_*.lua``); the commands are ``scrapy recrawl``
  and ``scrapy schedule``.

This package imports nothing of the frontier's: the frontier and the scheduler
build on it.
"""
