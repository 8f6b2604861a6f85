"""The shared frontier in Redis: the scheduler, the queue with its leases and
dupefilter (``frontier``, Lua scripts in ``scripts/``), requests as JSON
(``serializer``) and the request meta keys the stack uses (``meta``), start-URL
entries and their leases (``start_urls``), and the dead-letter list."""
