"""Every setting this package adds, with its one default.

Names shared with scrapy-redis keep scrapy-redis's spelling and meaning, so a
scrapy-redis project keeps working when it switches over.
"""

from __future__ import annotations

# --- connection -------------------------------------------------------------
REDIS_URL = "redis://127.0.0.1:6379/0"  # redis:// or rediss://, may carry a password and a db
REDIS_SOCKET_TIMEOUT = 10.0  # seconds per command before it fails
REDIS_CONNECT_TIMEOUT = 5.0  # seconds to establish a connection
REDIS_CLUSTER = False  # REDIS_URL names a node of a Redis Cluster; keys become {NAME}:...

# --- start URLs (scrapy-redis names) ----------------------------------------
REDIS_START_URLS_KEY = "%(name)s:start_urls"  # list the users LPUSH raw URLs or JSON to
REDIS_START_URLS_BATCH_SIZE = 100  # entries read from the start URL list per round trip
# seconds between a busy node's looks at the start list (an idle node looks at once):
# a crawl seeded beside a busy one starts within about this
REDIS_START_URLS_POLL = 1.0
# a start URL pushed again is fetched again (scrapy-redis's behaviour) instead of
# being dropped as seen; a JSON entry's own "dont_filter" wins
REDIS_START_URLS_DONT_FILTER = False
# the start key is a set (SADD, read in no order) or a sorted set (ZADD, highest score
# read first) instead of a list, as in scrapy-redis
REDIS_START_URLS_AS_SET = False
REDIS_START_URLS_AS_ZSET = False
# seconds the whole cluster's frontier must stay empty before a node closes; 0 = never
MAX_IDLE_TIME_BEFORE_CLOSE = 0
# request.meta keys a start-URL entry may set: ["*"] = any key that is not a control
# key of Scrapy or the stack (extensions/meta.py); control keys are never taken
START_URL_META_KEYS = ["*"]

# --- what may be fetched (extensions/urlpolicy.py)
ALLOWED_SCHEMES = ["http", "https"]  # other schemes are refused and their handlers removed
ALLOWED_PORTS: list[int] = []  # ports a request may use; empty = any
DENY_PRIVATE_NETWORKS = False  # refuse private/loopback/link-local addresses (resolved too)
# DNS shared by the cluster: a host is resolved by one node and its addresses kept in
# Redis (NAME:dns:HOST) for every node, for the answer's TTL within these bounds
DNS_SHARED = False
DNS_SERVERS: list[str] = []  # "address[:port]" to ask; empty: those /etc/resolv.conf names
DNS_CACHE_MIN_TTL = 60  # seconds an answer is kept at least (however short its TTL)
DNS_CACHE_MAX_TTL = 21600  # seconds at most (a host that moved is found within this)
DNS_NEGATIVE_TTL = 300  # seconds a name that does not exist (NXDOMAIN) is kept as such
# bytes: a response larger than this is cancelled and dead-lettered (Scrapy's own
# default is 1 GiB); the add-on sets it unless the project does
DOWNLOAD_MAXSIZE = 32 * 1024 * 1024
MAX_LINKS_PER_PAGE = 5000  # requests one response may produce; the rest are dropped, counted

# --- one page, one URL (extensions/urlnorm/) ---------------------------------
# every queued request's URL goes through the normalizer chain once, before the
# dupefilter; False: URLs are queued as the spider made them
URL_NORMALIZE_ENABLED = True
URL_NORMALIZERS_BASE = {
    "extensions.urlnorm.normalizers.BasicNormalizer": 100,
    "extensions.urlnorm.normalizers.TrackingParametersNormalizer": 200,
    "extensions.urlnorm.normalizers.SessionIdNormalizer": 300,
    "extensions.urlnorm.normalizers.HostRulesNormalizer": 400,
    "extensions.frontier.params.LearnedParametersNormalizer": 500,
    "extensions.urlnorm.normalizers.SortedQueryNormalizer": 900,
}
# a project's own normalizers, {class path: order}, merged with the base; None leaves one out
URL_NORMALIZERS: dict[str, int | None] = {}
# query parameters that say where a visitor came from (names or globs, any case)
URL_TRACKING_PARAMETERS = [
    "utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid",
    "twclid", "ttclid", "li_fat_id", "igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc",
    "_hsmi", "hsa_*", "mkt_tok", "oly_anon_id", "oly_enc_id", "vero_id", "rb_clickid",
    "s_cid", "wickedid", "spm", "scm", "__twitter_impression",
]  # fmt: skip
URL_DROP_PARAMETERS: list[str] = []  # more of them, the project's own (names or globs)
# query parameters that carry a visitor's session (``;jsessionid=`` in a path always goes)
URL_SESSION_PARAMETERS = [
    "jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid*", "cfid",
    "cftoken", "zenid", "osCsid",
]  # fmt: skip
# per host (and the names under it): {"example.com": {"drop": ["ref"], "rewrite":
# [["/print/", "/"]]}}: parameters dropped, then regex rewrites (re.sub) in order
URL_HOST_RULES: dict[str, dict] = {}
# learn, per host and for the cluster, the query parameters that never change its
# pages (from pairs of fetched URLs that differ only in one, with equal content
# digests: needs CONTENT_DUPLICATES on), and drop them from then on
URL_LEARN_PARAMETERS = True
URL_LEARN_PAIRS = 3  # equal pairs, and none that differed, that make a parameter learned

# a page whose content another URL of the crawl had first (its digest, volatile parts
# aside, in NAME:digests:*): "drop" its items, "mark" them (duplicate_of), or "off";
# its links are not followed either way. On by default: the same page under URLs no
# rule knows (print views, aliases, mirrors) is stored once unmarked, and the host
# parameter learning (URL_LEARN_PARAMETERS) feeds on its digests
CONTENT_DUPLICATES = "mark"
# with CONTENT_DUPLICATES on, a page within CONTENT_NEAR_DISTANCE bits (0-3) of the
# 64-bit SimHash of a page of its registered domain fetched first, and of at least
# CONTENT_NEAR_MIN_WORDS distinct words: "mark" its items (near_duplicate_of, links
# followed), "drop" them (links not followed), or "off"
CONTENT_NEAR_DUPLICATES = "mark"
CONTENT_NEAR_DISTANCE = 3
CONTENT_NEAR_MIN_WORDS = 100
# what a page says of itself (<meta name="robots">, X-Robots-Tag, for every crawler or
# this one's token): nofollow, no request it yields is queued; noindex, its items are
# dropped ("drop") or kept with _noindex set ("flag"); ROBOTS_META_OBEY = False: none of
# it. A rel="nofollow" link says the page does not vouch for its target (a hint, as the
# major search engines read it, not a rule of crawling): followed unless False here
ROBOTS_META_OBEY = True
ROBOTS_META_NOINDEX = "drop"
ROBOTS_FOLLOW_NOFOLLOW_LINKS = True
# each item carries (_usage) the Content-Signal / Content-Usage preferences of its host's
# robots.txt and of its page's headers, e.g. {"search": "yes", "ai-train": "no"}
USAGE_SIGNALS_ENABLED = True
# Web Bot Auth: with an Ed25519 private key file (PEM; `scrapy botauth keygen PATH` makes
# one), every request is signed (RFC 9421) for the key directory at the https URL
# BOT_AUTH_SIGNATURE_AGENT, each signature valid BOT_AUTH_VALIDITY seconds
BOT_AUTH_KEY = ""
# more key files, to rotate: the newest one valid now (its directory's nbf, exp) signs
BOT_AUTH_KEYS: list[str] = []
# "wg": the working group's form (Signature-Agent a dictionary, its member covered, a
# nonce per request); "legacy": the earlier drafts' (a plain string, no nonce)
BOT_AUTH_FORMAT = "wg"
BOT_AUTH_SIGNATURE_AGENT = ""
BOT_AUTH_VALIDITY = 60.0
# a page's rel="canonical" to another URL of its site: recorded on its items
# (canonical) and that URL marked seen for the crawl, never fetched for it
CANONICAL_ENABLED = True

# --- the frontier -----------------------------------------------------------
SCHEDULER_PERSIST = True  # keep the crawl state in Redis when a node closes
SCHEDULER_FLUSH_ON_START = False  # wipe this spider's crawl state when a node opens
DUPEFILTER_MODE = "exact"  # "exact" (14-byte fingerprints, ~17 B/URL) or "bloom" (~1.9 B/URL)
DUPEFILTER_BLOOM_CAPACITY = 10_000_000  # URLs the Bloom filter is sized for (memory: ~1.8 B each)
DUPEFILTER_BLOOM_ERROR_RATE = 0.001  # Bloom false-positive rate: new URLs taken as seen
# fingerprints a node remembers having sent, so links it meets again (most of them)
# are dropped without a trip to Redis, and their URLs, so the link path skips them
# before building a request, SentLinksMiddleware drops a request for one as it is
# yielded and the scheduler before fingerprinting one; 0 = off.
# Memory: up to ~300 B a link, two generations
DUPEFILTER_LOCAL_CACHE = 100_000
# links the link path (extensions/follow.py) keeps resolved, per extractor: an href
# met again on a page of the same directory costs a dictionary lookup, not a urljoin
FOLLOW_RESOLVED_CACHE = 50_000
FRONTIER_FETCH_BATCH = 16  # requests leased per round trip into the local buffer
# requests a node holds leased and unconfirmed at most (buffered, being fetched, parsed
# and waiting for the item store): what a kill -9 fetches again; 0 = twice
# CONCURRENT_REQUESTS plus FRONTIER_FETCH_BATCH plus ITEM_STORE_BATCH_SIZE
FRONTIER_MAX_UNCONFIRMED = 0
FRONTIER_ENQUEUE_BATCH = 200  # discovered requests buffered before one pipelined write
FRONTIER_LEASE_TIMEOUT = 600.0  # seconds a lease lasts even while its node still beats
FRONTIER_RELEASE_INTERVAL = 0.2  # seconds between batched lease releases
FRONTIER_IDLE_POLL_MIN = 0.05  # seconds an idle node first waits before asking Redis again
FRONTIER_IDLE_POLL_MAX = 1.0  # seconds an idle node waits at most between asks
# the frontier's capabilities beside its leases (extensions/frontier/part.py), each a
# class with its order, as Scrapy's *_MIDDLEWARES_BASE; a part a crawl does not use
# (no FRONTIER_OVERFLOW, say) stays out by itself. Every bundled part is declared by
# its capability (the end of this module adds them)
FRONTIER_PARTS_BASE: dict[str, int] = {}
# a project's own parts, {class path: order}, merged with FRONTIER_PARTS_BASE; None leaves one out
FRONTIER_PARTS: dict[str, int | None] = {}
# seconds ahead a request may be parked (retries, politeness, resting proxies);
# later than that is refused and dead-lettered, so nothing waits forever
FRONTIER_MAX_DELAY = 86400.0

# --- retries (whether to retry: Scrapy's RETRY_TIMES, RETRY_HTTP_CODES, RETRY_EXCEPTIONS) ---
RETRY_BACKOFF_BASE = 1.0  # seconds: retry n waits uniform(0, min(max, base * 2**(n-1)))
RETRY_BACKOFF_MAX = 60.0  # seconds: the cap of that exponential
RETRY_AFTER_MAX = 300.0  # seconds: the longest Retry-After (on 429/503) that is honored

# --- politeness across the cluster (decided when work is leased, per queue group) ---
# requests per second per host from all nodes together; 0 = no limit; per-host
# overrides in CLUSTER_HOST_RATES = {"example.com": 2.0} (a dict setting, default empty)
CLUSTER_HOST_RATE = 0.0
CLUSTER_CRAWL_DELAY_MAX = 30.0  # seconds: the longest robots.txt Crawl-delay honoured
# fraction of a paced host's interval a send may come late by; slots are spaced by
# the interval plus this (and, below about 5 requests a second, a fifth of the
# interval, at most 100 ms), and a node later than that asks Redis for a new slot
CLUSTER_SEND_TOLERANCE = 0.02
# seconds a ready unpaced host waits for the node that leased it last (its warm
# connection and TLS session are there), from the moment another node first passes
# it over, before that node takes it; a node with no other work takes it at once;
# 0 = any node takes any host
FRONTIER_HOST_AFFINITY = 1.0
# what a queue is kept per: "host", "domain" (registered domain) or "slot" (the
# request's download_slot meta when set, else the host)
FRONTIER_QUEUE_BY = "host"
# parts the frontier is split into by host, each under its own hash tag: a count,
# or "auto": the count the crawl recorded, else 1 on a single Redis and 32 per
# primary on a Redis Cluster
FRONTIER_SHARDS = "auto"
HOST_PAGE_BUDGET = 0  # requests a host (queue group) may be given in one crawl; 0 = no limit
# best first (extensions/scoring.py): a class with score(request, response), else the
# spider's score_request method; a request's priority moves by round(score * SCALE)
FRONTIER_SCORER = ""
FRONTIER_SCORE_SCALE = 100.0
SCORER_KEYWORDS: list[str] = []  # AnchorKeywordScorer's words

# --- robots.txt (Scrapy's ROBOTSTXT_OBEY; extensions/downloadermiddlewares/robotstxt.py) ---
ROBOTSTXT_RETRY_DELAY = 30.0  # seconds a host's requests wait when its robots.txt fails (5xx)
ROBOTSTXT_RETRY_TIMES = 10  # waits a request may spend on that before it is dropped
# robots.txt fetched once for the cluster and kept in Redis for every node
# (extensions/robotscache.py), for at most ROBOTSTXT_CACHE_TTL seconds (RFC 9309: 24 h);
# False: every node fetches each host's robots.txt itself
ROBOTSTXT_SHARED = True
ROBOTSTXT_CACHE_TTL = 86400
SITEMAP_FROM_ROBOTS = False  # read the Sitemap: lines of the robots.txt of every host queued

# --- hosts that push back (extensions/frontier/hosts/state.py): held for the whole cluster ---
HOST_BACKOFF_STATUSES = [429, 503]  # answers that mean "slow down"
HOST_BACKOFF_BASE = 2.0  # seconds: the first hold without Retry-After, doubling per strike
HOST_BACKOFF_MAX = 3600.0  # seconds: the longest hold, a Retry-After's included
HOST_BACKOFF_FORGIVE = 10.0  # seconds without a pushback that forgive one strike
HOST_BACKOFF_ERRORS = 5  # connection errors or timeouts in a row that hold a host; 0 = never
# the evidence that a host, not a page, refuses: refusals of distinct pages that
# are at least HOST_BACKOFF_SHARE of its answers in a window of about
# HOST_BACKOFF_WINDOW seconds, and at least HOST_BACKOFF_MIN_REFUSALS of them
HOST_BACKOFF_SHARE = 0.05  # a fraction of the host's recent answers
HOST_BACKOFF_MIN_REFUSALS = 4  # refusals of distinct pages
HOST_BACKOFF_WINDOW = 40.0  # seconds: the time constant of the evidence's decay
# times one request may wait for its host's hold before its answer counts as a failure
HOST_BACKOFF_RETRY_TIMES = 5
CLUSTER_AUTOTHROTTLE_ENABLED = True  # a host's rate adapts to its pushback, for the cluster
CLUSTER_AUTOTHROTTLE_MIN_RATE = 0.2  # requests/s: the adaptive rate's floor
CLUSTER_AUTOTHROTTLE_STEP = 2.0  # seconds of good answers between two raises of the rate

# --- bans (extensions/downloadermiddlewares/hostbackoff.py): never stored as data ---
BAN_STATUSES = [403]  # answers that mean "banned"
BAN_MARKERS: list[str] = []  # text that makes a page a ban page, besides the built-in ones
BAN_RETRY_TIMES = 5  # times a banned request is tried again before it is dead-lettered
BAN_HANDLER = ""  # a component whose handle_ban(request, response) may answer a challenge

# --- crawler traps (extensions/frontier/traps.py); 0 turns a rule off ---
TRAP_CHAIN_LIMIT = 200  # pages in a row that differ only in numbers, each found from the last
TRAP_REPEATED_SEGMENTS = 3  # times one path segment may come back (/a/b/a/b/a)
TRAP_QUERY_VARIANTS = 1000  # distinct query strings on one path of one host (per node)

# --- proxies (scrapy-rotating-proxies' ROTATING_PROXY_* settings apply too) ---
PROXY_BAN_STATUSES = [403, 407, 429]  # statuses that mean the proxy is banned
PROXY_BAN_MARKERS: list[str] = []  # text in a 200 page that means a ban page, e.g. "captcha"

# --- user agents ---
USER_AGENT_ROTATION = True  # a fake-useragent identity per request unless one was chosen
USER_AGENT_BROWSERS = ["Chrome", "Firefox", "Safari", "Edge"]  # fake-useragent browser names
USER_AGENT_PLATFORMS = ["desktop"]  # desktop, mobile, tablet
USER_AGENT_OS: list[str] = []  # e.g. ["Windows", "Mac OS X", "Linux"]; empty = any
USER_AGENT_POOL_SIZE = 200  # identities drawn at start-up (weighted by how common they are)
USER_AGENT_STICKY_PER_PROXY = False  # one identity per proxy exit, the same on every node
USER_AGENT_LANGUAGE = "en-US,en;q=0.9"  # Accept-Language sent with the rotated identities

# --- scrapyd ---
SCRAPYD_PROJECT = "crawler"  # the project name the egg is deployed under (scrapy.cfg)
# SCRAPYD_NODES: list of scrapyd URLs (or the SCRAPYD_NODES environment variable)

# --- nodes ------------------------------------------------------------------
NODE_ID = ""  # this node's name in Redis; empty = host-pid-random
NODE_HEARTBEAT_INTERVAL = 2.0  # seconds between heartbeats
NODE_TIMEOUT = 15.0  # seconds without a heartbeat before a node is dead and its leases return
NODE_FORGET_AFTER = 86400.0  # seconds after its last heartbeat a node leaves NAME:nodes and status
NODE_STALL_TIME = 120.0  # seconds a live node may go without a page while work waits: stalled

# --- the node's garbage collector (extensions/gctuning.py) ---
GC_FREEZE = True  # freeze the objects alive when the spider opens: collections skip them
# Python's gc.set_threshold while a spider is open: a young-generation pass every
# 50,000 allocations instead of 700; empty = Python's own thresholds
GC_THRESHOLD = [50_000, 20, 20]

# --- metrics ---
METRICS_PORT = ""  # Prometheus metrics port, or a range such as 9410-9419; empty or 0 = off
METRICS_ADDRESS = "0.0.0.0"  # interface the metrics listen on (Prometheus scrapes from afar)
HEALTH_REACTOR_TIMEOUT = 30.0  # seconds without a reactor turn before /healthz fails
HEALTH_REDIS_GRACE = 60.0  # seconds without Redis before /healthz fails (/readyz at once)
SERIES_HOURS = 6.0  # hours of per-minute pages, items and errors nodes keep in NAME:series

# --- the web console (scrapy console; extensions/console) ---
CONSOLE_BIND = "127.0.0.1"  # interface the console listens on; another needs CONSOLE_PASSWORD
CONSOLE_PORT = 6880  # TCP port of the console
CONSOLE_USER = "admin"  # the user CONSOLE_PASSWORD logs in (an admin: may act)
CONSOLE_PASSWORD = ""  # empty = no login (loopback only); else needed for every page and call
# more users: name -> {"password": HASH, "role": "admin" or "read"}; HASH from
# `scrapy console --hash-password` (a read user sees everything and may do nothing)
CONSOLE_USERS: dict[str, dict[str, str]] = {}
CONSOLE_SECRET = ""  # signs login sessions; empty = random per start (set it for replicas)
CONSOLE_SESSION_HOURS = 12.0  # hours a login session lasts
CONSOLE_SECURE_COOKIE = "auto"  # session cookie only over HTTPS: True, False, or auto (if HTTPS)
CONSOLE_REFRESH = 3.0  # seconds between a page's live updates
CONSOLE_DLQ_SCAN = 100_000  # dead letters (newest first) a filter or an action looks through

# --- item store -------------------------------------------------------------
MONGO_URI = ""  # empty = write JSON Lines instead
MONGO_DATABASE = "crawler"  # database the items go to
MONGO_WRITE_MODE = "upsert"  # "upsert" (update on every write) or "insert" (first write wins)
MONGO_RETRY_TIME = 30.0  # seconds a batch is retried before it is spilled to the journal
MONGO_JOURNAL_DIR = "data/journal"  # spilled batches (NAME/*.bson) and rejected.jsonl
ITEMS_DIR = "data"  # folder of the JSON Lines store: ITEMS_DIR/NAME/NODE.jsonl
ITEM_STORE_BATCH_SIZE = 500  # items per write
ITEM_STORE_FLUSH_INTERVAL = 1.0  # seconds an item waits at most before its batch is written
ITEM_STORE_MAX_PENDING = 5000  # items buffered or being written before the crawl is made to wait


# --- the settings the capability packages declare (extensions/capability.py) ----
def _declared() -> None:
    from extensions import capability

    globals().update({name: setting.default for name, setting in capability.settings().items()})
    parts = {**FRONTIER_PARTS_BASE, **capability.components("frontier_parts")}
    FRONTIER_PARTS_BASE.clear()
    FRONTIER_PARTS_BASE.update(sorted(parts.items(), key=lambda part: part[1]))


_declared()
