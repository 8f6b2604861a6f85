"""Settings of the crawler project.

The distributed stack is one add-on; connection settings come from the
environment (``REDIS_URL``, ``MONGO_URI``, ``MONGO_DATABASE``) and any setting
can be overridden per run with ``scrapy crawl NAME -s SETTING=VALUE``.
Defaults of the add-on's own settings live in ``extensions/defaults.py``.
"""

import os

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
COMMANDS_MODULE = "extensions.commands"

ADDONS = {"extensions.addon.DistributedAddon": 0}

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_CLUSTER = os.environ.get("REDIS_CLUSTER", "False")  # True: REDIS_URL is a cluster node
MONGO_URI = os.environ.get("MONGO_URI", "")
MONGO_DATABASE = os.environ.get("MONGO_DATABASE", "crawler")
ITEMS_DIR = os.environ.get("ITEMS_DIR", "data")
MAX_IDLE_TIME_BEFORE_CLOSE = int(os.environ.get("MAX_IDLE_TIME_BEFORE_CLOSE", "0"))
METRICS_PORT = os.environ.get("METRICS_PORT", "")
# True in the container images: private, loopback and link-local addresses are refused.
DENY_PRIVATE_NETWORKS = os.environ.get("DENY_PRIVATE_NETWORKS", "False")

USER_AGENT = "crawler (distributed Scrapy; +https://docs.scrapy.org)"
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 32
DOWNLOAD_TIMEOUT = 30
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
FEED_EXPORT_ENCODING = "utf-8"
