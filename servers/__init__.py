"""The local servers the demo, the tests and the benchmarks start: Redis (one, or a
Redis Cluster), the demo site, crawler nodes, a MongoDB-wire server, scrapyd, the
console, a DNS server answering from a zone, forward and latency proxies, nginx;
and the one way they build a Redis client (``clients.py``). Each binds to loopback
on a free port and is stopped by whoever started it."""
