"""Settings of the crawler project.

The distributed stack is one add-on, which installs the defaults of its own
settings (``extensions/defaults.py``) and reads connections from the environment
where a variable is set (``REDIS_URL``, ``MONGO_URI``, ...:
``extensions/environment.py``); any setting can be overridden per run with
``scrapy crawl NAME -s SETTING=VALUE``.
"""

import os

from extensions import environment

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
COMMANDS_MODULE = "extensions.commands"

ADDONS = {"extensions.addon.DistributedAddon": 0}

# logging is set up before the add-on runs: LOG_LEVEL is read here; the connections
# (REDIS_URL, MONGO_URI, ...) too, as project settings, so `scrapy settings --get` shows
# them (the add-on would read them in any project)
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
globals().update(environment.values())

USER_AGENT = "crawler (distributed Scrapy; +https://docs.scrapy.org)"
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 32
DOWNLOAD_TIMEOUT = 30
TELNETCONSOLE_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
