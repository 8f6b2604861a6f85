"""The Parquet store (``ITEM_STORE = "parquet"``): items into Parquet files in a
directory or on S3, each item once, by the lease path.

``pages.py`` ties each item to the page it came from; ``store.py`` spools the
rows on the node's disk (``spool.py``) in the crawl's schema (``schema.py``);
``part.py`` commits a segment with the release of its pages' leases, in one
transaction, and ``publish.py`` makes it a file where readers find it."""
