"""URLs are not pages: the normalizer chain a request's URL goes through once,
before the dupefilter and the frontier (``chain.py``), and the normalizers the
project ships (``normalizers.py``)."""
