"""One check of every setting at start; defaults installed by the add-on."""

import pytest
from scrapy.settings import Settings

from extensions import config, defaults
from extensions.addon import DistributedAddon
from tests.conftest import scrapy

BAD_VALUES = [
    ("FRONTIER_FETCH_BATCH", 0),
    ("FRONTIER_FETCH_BATCH", "many"),
    ("FRONTIER_ENQUEUE_BATCH", -1),
    ("FRONTIER_LEASE_TIMEOUT", 0),
    ("FRONTIER_MAX_DELAY", "inf"),
    ("REDIS_START_URLS_BATCH_SIZE", 0),
    ("REDIS_URL", "http://127.0.0.1:6379"),
    ("REDIS_SOCKET_TIMEOUT", -2),
    ("REDIS_CLUSTER", "maybe"),
    ("DUPEFILTER_MODE", "fuzzy"),
    ("DUPEFILTER_BLOOM_ERROR_RATE", 1.5),
    ("DUPEFILTER_BLOOM_CAPACITY", 0),
    ("DUPEFILTER_LOCAL_CACHE", -5),
    ("ALLOWED_SCHEMES", []),
    ("ALLOWED_PORTS", [0]),
    ("ALLOWED_PORTS", ["web"]),
    ("MAX_LINKS_PER_PAGE", -1),
    ("RETRY_BACKOFF_BASE", -1),
    ("CLUSTER_HOST_RATE", -0.5),
    ("CLUSTER_HOST_RATES", {"example.com": "fast"}),
    ("PROXY_BAN_STATUSES", [999]),
    ("USER_AGENT_POOL_SIZE", 0),
    ("NODE_TIMEOUT", 0),
    ("METRICS_PORT", "9420-9410"),
    ("MONGO_WRITE_MODE", "append"),
    ("ITEM_STORE_BATCH_SIZE", 0),
    ("ITEM_STORE_FLUSH_INTERVAL", 0),
    ("START_URL_META_KEYS", [""]),
    ("FRONTIER_SHARDS", 0),
    ("FRONTIER_SHARDS", "some"),
    ("FRONTIER_SHARDS", 5000),
    ("GC_THRESHOLD", "often"),
    ("GC_THRESHOLD", "50000,20"),
    ("GC_THRESHOLD", [0, 10, 10]),
    ("GC_FREEZE", "maybe"),
    ("RENDER_URLS", ["/js/("]),
    ("RENDER_AUTO_URLS", [7]),
    ("RENDER_MAX_PAGES", 0),
    ("RENDER_PAGE_TIMEOUT", 0),
    ("RENDER_AUTO_RECHECK", 1.5),
    ("RENDER_MEMORY_LIMIT_MB", 10),
    ("FRONTIER_PARTS", ["extensions.frontier.crawls.part.CrawlsPart"]),
    ("FRONTIER_PARTS", {"extensions.frontier.crawls.part.CrawlsPart": "first"}),
    ("FRONTIER_PARTS", {"extensions.frontier.nothing.Here": 500}),
    ("FRONTIER_PARTS", {"extensions.frontier.crawls.state.Crawls": 500}),
    ("FRONTIER_SCORER", "extensions.scoring.NoSuchScorer"),
    ("FRONTIER_SCORER", "extensions.scoring.as_score"),  # no score method
    ("FRONTIER_SCORE_SCALE", -1),
    ("SCORER_KEYWORDS", [3]),
    ("FRONTIER_SCORER", "extensions.scoring.AnchorKeywordScorer"),  # and no keywords
    ("WARC_DIR", "ftp://archive/warc"),
    ("WARC_DIR", "s3:///no-bucket"),
    ("WARC_DIGESTS_IN_REDIS", -1),
    ("RECRAWL_RULES", {"/news/(": 3600}),
    ("RECRAWL_STORE", "disk"),
    ("FRONTIER_OVERFLOW", "redis"),
    ("FRONTIER_OVERFLOW", "mongo"),  # and no MONGO_URI: where would it go?
    ("FRONTIER_HOST_QUEUE_MAX", 0),
    ("CRAWL_ID", "two words"),
    ("CRAWL_PAGE_BUDGET", -1),
    ("SCOPE_REFRESH", 0),
    ("CRAWL_PURPOSE", "ads"),
    ("USAGE_ENFORCE", "warn"),
    ("PAY_PER_CRAWL_MAX_PRICE", "ten"),
    ("PAY_PER_CRAWL_BUDGET", "USD -1"),
    ("BOT_AUTH_FORMAT", "v2"),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_every_out_of_range_setting_is_one_line_naming_it(name, value):
    problems = config.problems(Settings({name: value}))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{name} = {value!r}: ")


def test_the_defaults_pass_and_settings_that_clash_are_named():
    assert config.problems(Settings()) == []
    clash = config.problems(Settings({"NODE_TIMEOUT": 2, "NODE_HEARTBEAT_INTERVAL": 2}))
    assert clash and "NODE_TIMEOUT must be longer than NODE_HEARTBEAT_INTERVAL" in clash[0]
    handler = "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"
    handlers = {"http": handler, "https": handler}
    other_handler = Settings({"DENY_PRIVATE_NETWORKS": True, "DOWNLOAD_HANDLERS": handlers})
    assert "HTTP/1.1 download handler" in config.problems(other_handler)[0]


def test_an_address_rate_shares_dns_unless_the_project_says_not_on_any_shard_count():
    settings = Settings()
    settings.set("CLUSTER_IP_RATE", 10, "project")
    DistributedAddon().update_settings(settings)
    assert settings.getbool("DNS_SHARED") and settings.getbool("ROBOTSTXT_SHARED")
    refused = Settings({"CLUSTER_IP_RATE": 10, "DNS_SHARED": False})
    DistributedAddon().update_settings(refused)
    assert not refused.getbool("DNS_SHARED")  # each node resolves for itself then
    # a sharded frontier claims the levels' slots apart from the lease (claims.py)
    assert config.problems(Settings({"CLUSTER_DOMAIN_RATE": 5, "FRONTIER_SHARDS": 8})) == []
    assert config.problems(Settings({"CLUSTER_DOMAIN_RATE": 5, "FRONTIER_SHARDS": 1})) == []


def test_the_addon_installs_every_default_and_a_project_value_wins():
    settings = Settings()
    settings.set("FRONTIER_FETCH_BATCH", 64, "project")
    DistributedAddon().update_settings(settings)
    for name in (n for n in dir(defaults) if n.isupper() and n != "FRONTIER_FETCH_BATCH"):
        assert settings[name] == getattr(defaults, name), name
    assert settings.getint("FRONTIER_FETCH_BATCH") == 64


def test_scrapy_settings_shows_the_defaults_and_crawl_refuses_a_bad_value(redis_url):
    shown = scrapy("settings", "--get", "FRONTIER_FETCH_BATCH")
    assert shown.returncode == 0 and shown.stdout.strip() == "16"
    refused = scrapy("crawl", "shop", "-s", f"REDIS_URL={redis_url}",
                     "-s", "FRONTIER_FETCH_BATCH=0", "-s", "LOG_LEVEL=INFO")  # fmt: skip
    assert refused.returncode == 1
    critical = [line for line in refused.stderr.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1
    assert "FRONTIER_FETCH_BATCH = '0': must be at least 1" in critical[0]
    assert "Traceback" not in refused.stderr


def test_a_scrapy_without_the_engine_internals_the_stack_needs_is_refused(monkeypatch):
    from scrapy.core import engine as scrapy_engine

    class RenamedSlot:
        def __init__(self, close_if_idle, nextcall, scheduler):
            self.requests_underway = set()
            self.nextcall = nextcall

    monkeypatch.setattr(scrapy_engine, "_Slot", RenamedSlot)
    problems = config.problems(Settings())
    assert len(problems) == 1
    assert "has no _Slot.inprogress" in problems[0] and "Scrapy 2." in problems[0]


def test_the_public_paths_users_put_in_their_settings_still_load():
    from scrapy.utils.misc import load_object

    for path in ("extensions.addon.DistributedAddon", "extensions.spiders.DistributedSpider",
                 "extensions.spiders.DistributedCrawlSpider",
                 "extensions.pipelines.ItemStorePipeline"):  # fmt: skip
        assert isinstance(load_object(path), type), path


@pytest.mark.parametrize(
    "path",
    [
        "extensions.frontier.scheduler.DistributedScheduler",
        "extensions.recrawl.middleware.RecrawlMiddleware",
        "extensions.downloadermiddlewares.retry.BackoffRetryMiddleware",
        "extensions.downloadermiddlewares.pushback.PushbackMiddleware",
        "extensions.downloadermiddlewares.politeness.ClusterPolitenessMiddleware",
        "extensions.downloadermiddlewares.proxies.RotatingProxyMiddleware",
        "extensions.downloadermiddlewares.useragents.RotatingUserAgentMiddleware",
        "extensions.spidermiddlewares.traps.TrapMiddleware",
        "extensions.spidermiddlewares.linklimit.LinkLimitMiddleware",
        "extensions.pipelines.itemstore.ItemStorePipeline",
    ],
)
def test_a_component_built_without_the_add_on_says_so_in_one_line(path):
    """The components read the settings the add-on installs, with no defaults of
    their own: listed by hand without it, each names itself and what to add."""
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from extensions.exceptions import ConfigError

    component = load_object(path)
    with pytest.raises(ConfigError, match=rf"^{component.__name__} needs the add-on: add ADDONS"):
        component.from_crawler(get_crawler(settings_dict={"REDIS_URL": "redis://127.0.0.1:1"}))


def test_a_node_keeps_scrapys_concurrent_items_and_starts_tasks_only_where_outputs_wait():
    # Scrapy starts CONCURRENT_ITEMS tasks for every response; the extension does not
    settings = Settings()
    DistributedAddon().update_settings(settings)
    assert settings.getint("CONCURRENT_ITEMS") == 100
    assert settings["EXTENSIONS"]["extensions.outputs.SpiderOutputTasks"] == 100
    own = Settings()
    own.set("EXTENSIONS", {"extensions.outputs.SpiderOutputTasks": None}, "project")
    DistributedAddon().update_settings(own)
    assert own["EXTENSIONS"]["extensions.outputs.SpiderOutputTasks"] is None


def test_reparse_turns_off_every_downloader_middleware_the_stack_and_its_capabilities_add():
    from extensions.commands.reparse import ReparseAddon

    settings = Settings()
    ReparseAddon().update_settings(settings)
    middlewares = settings["DOWNLOADER_MIDDLEWARES"]
    # declared in their packages (render, recrawl), not in the add-on's own list
    for path in (
        "extensions.render.autocheck.RenderAutoMiddleware",
        "extensions.recrawl.middleware.RecrawlMiddleware",
        "extensions.downloadermiddlewares.politeness.ClusterPolitenessMiddleware",
    ):
        assert path in middlewares and middlewares[path] is None, path
