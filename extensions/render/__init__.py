"""Browser rendering: pages whose content and links JavaScript writes.

``actions`` checks the page actions a request carries through Redis, ``policy``
decides which requests a browser fetches (``meta["render"]``, RENDER_URLS, the
cluster's learned decisions of RENDER_AUTO), ``browser`` finds Chromium and
measures it, ``handler`` is the download handler that renders (scrapy-playwright,
bounded), and ``autocheck`` sends a page that came back without its content to
the render lane.
"""
