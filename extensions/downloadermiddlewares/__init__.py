"""Downloader middlewares: retries that wait in Redis, cluster-wide politeness,
proxies, user agents, and what may be fetched (``urlpolicy``)."""
