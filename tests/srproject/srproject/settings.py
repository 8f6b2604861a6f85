"""scrapy-redis's example settings; SWITCHED=1 in the environment stands for the
README's one-step switch (the add-on added, the left-over scrapy-redis lines kept
to show they are taken over)."""

import os

SPIDER_MODULES = ["srproject.spiders"]
NEWSPIDER_MODULE = "srproject.spiders"

DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"
SCHEDULER = "scrapy_redis.scheduler.Scheduler"
SCHEDULER_PERSIST = True
SCHEDULER_QUEUE_CLASS = "scrapy_redis.queue.PriorityQueue"
ITEM_PIPELINES = {"scrapy_redis.pipelines.RedisPipeline": 400}
LOG_LEVEL = "INFO"
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False

if os.environ.get("SWITCHED"):
    ADDONS = {"extensions.addon.DistributedAddon": 0}
    COMMANDS_MODULE = "extensions.commands"
