"""The nodes of a crawl: identity, heartbeats and progress (``checkpoint``)."""
