"""Settings of the crawler project.

The distributed stack is one add-on, which installs the defaults of its own
settings (``extensions/defaults.py``). A setting named below can also come from
the environment, and only does when the variable is set (``REDIS_URL``,
``MONGO_URI``, ...); any setting can be overridden per run with
``scrapy crawl NAME -s SETTING=VALUE``.
"""

import os

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
COMMANDS_MODULE = "extensions.commands"

ADDONS = {"extensions.addon.DistributedAddon": 0}

LOG_LEVEL = "INFO"

# Read from the environment where set: the container images and scrapyd nodes
# pass connections and per-deployment switches this way.
_from_environment = (
    "REDIS_URL",
    "REDIS_CLUSTER",  # True: REDIS_URL is a node of a Redis Cluster
    "MONGO_URI",
    "MONGO_DATABASE",
    "ITEMS_DIR",
    "MAX_IDLE_TIME_BEFORE_CLOSE",
    "METRICS_PORT",
    "DENY_PRIVATE_NETWORKS",  # True in the container images
    "LOG_LEVEL",
    "RENDER_ENABLED",  # True in the render image: this node renders (a browser found)
    "RENDER_BROWSER",
    # the web console (scrapy console): where it listens and who may log in
    "CONSOLE_BIND",
    "CONSOLE_USER",
    "CONSOLE_PASSWORD",
    "CONSOLE_USERS",  # JSON: {"name": {"password": HASH, "role": "admin" or "read"}}
    "CONSOLE_SECRET",  # the same on every replica, so a login holds across them
)
globals().update({name: os.environ[name] for name in _from_environment if name in os.environ})

USER_AGENT = "crawler (distributed Scrapy; +https://docs.scrapy.org)"
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 32
DOWNLOAD_TIMEOUT = 30
TELNETCONSOLE_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
