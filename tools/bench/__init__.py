"""``make bench`` (``python -m tools.bench``): the run (``__main__.py``), what
its sections share (``base.py``) and the sections (``sections/``)."""
