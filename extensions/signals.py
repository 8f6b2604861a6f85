"""The stack's own Scrapy signals (``crawler.signals.connect(handler, signal=...)``)."""

#: the node holds FRONTIER_MAX_UNCONFIRMED requests and leases no more until some
#: are confirmed: the item store should write what it holds now, not at its interval
backlog_full = object()

#: this node learned (or undid) query parameters of a host (``frontier/params.py``):
#: its own normalizer drops them at once, the other nodes within a second.
#: Arguments: host, learned (names), undone (names)
params_learned = object()
