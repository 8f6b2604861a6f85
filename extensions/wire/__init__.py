"""The wire: HTTPS verified and resumed, HTTP/2 by setting (``declared.py``)."""
