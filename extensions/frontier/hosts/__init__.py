"""Host politeness and pushback in the frontier: one state per host in Redis
(holds, the adaptive rate, send slots: ``state``) and a node's answers per host,
the evidence of refusals (``answers``). The downloader middlewares that act on
them are Scrapy's side (``downloadermiddlewares/politeness.py``, ``pushback.py``,
``sendslots.py``); the lease script reads the same state (``scripts/_pacing.lua``)."""
