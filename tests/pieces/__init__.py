"""A project's own Lua piece, as a part of a project's would bring one (test_manifest.py)."""
