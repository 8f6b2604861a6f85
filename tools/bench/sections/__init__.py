"""``make bench``'s sections, one module each (``sNN_name.py``), found by
``tools/bench/__main__.py``."""
