"""Crawl ids: several crawls of one spider in one frontier (``state``), and the
frontier part that registers them, ends expired ones and leaves paused work out
of a node's idle check (``part``)."""
