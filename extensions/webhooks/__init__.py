"""Crawl events to webhooks (``WEBHOOK_URLS``): crawl.started, paused, resumed,
completed and failed, once for the cluster, signed as Standard Webhooks signs
them, retried with backoff and dead-lettered after the last try."""
