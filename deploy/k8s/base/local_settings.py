"""Settings of the crawler pods: the project's, then what differs on Kubernetes.

Mounted from the ConfigMap ``crawler-settings``; SCRAPY_SETTINGS_MODULE names it.
Edit it here (or replace it in an overlay) to tune the crawl.
"""

import os

from crawler.settings import *  # noqa: F403 (the project's settings, then overrides)

# The pod's name is the node's name in Redis and in `scrapy status`.
NODE_ID = os.environ.get("POD_NAME", "")
# A stopped pod finishes its downloads within this, then hands its leases back:
# the Deployment's terminationGracePeriodSeconds (90) leaves room for both.
DOWNLOAD_TIMEOUT = 30
CONCURRENT_REQUESTS = 32
# Items go to MongoDB when MONGO_URI is set (the Secret), else to this directory.
ITEMS_DIR = "/home/crawler/data/items"
MONGO_JOURNAL_DIR = "/home/crawler/data/journal"
