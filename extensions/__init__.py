"""Distributed extensions for Scrapy: a Redis frontier shared by many nodes.

Enable everything in a Scrapy project with one line in its settings::

    ADDONS = {"extensions.addon.DistributedAddon": 0}
"""
