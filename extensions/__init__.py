"""Distributed extensions for Scrapy: a Redis frontier shared by many nodes.

Enable everything in a Scrapy project with one line in its settings::

    ADDONS = {"extensions.addon.DistributedAddon": 0}
"""

#: the stack's version, as every node reports it in its heartbeat (setup.py reads it)
__version__ = "1.1"
