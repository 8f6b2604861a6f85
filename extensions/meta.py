"""Every ``request.meta`` key the stack reads or writes, and the rules for meta
that arrives from outside (a start-URL entry, a queue entry another node wrote).

Control keys steer how a request is fetched (its proxy, robots.txt, size cap,
politeness slot, retry bookkeeping). They are set by the spider's own code and
by the stack's middlewares; a start-URL entry never sets them (they are dropped,
logged and counted), and in a queue entry they must have the type the stack
expects, or the entry is dead-lettered.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from extensions import capability
from extensions.crawlid import crawl_id_problem

#: park the request in ``NAME:delayed`` until this time (s since epoch)
DELAY_UNTIL = "delay_until"
#: when the request first failed (s since epoch), kept across retries
FIRST_FAILURE = "retry_first_failure"
#: set on a request that went to the dead-letter queue (failed, not done)
DEAD_LETTERED = "_dead_lettered"
#: the start-URL entry a request was built from (node-local, never stored)
START_ENTRY = "_start_entry"
#: a page's recrawl state (validators, content fingerprint, interval), carried
#: by the request that fetches it again
RECRAWL = "recrawl"
#: seconds until this page is fetched again (RECRAWL_AFTER for one request)
RECRAWL_AFTER = "recrawl_after"
#: [when (s since epoch) the request may go to its host, seconds after that it
#: may still go]: its lease's pacing slot (node-local: set at each lease,
#: dropped when the request is queued again)
SEND_SLOT = "_send_slot"
#: its host pushed back: its good answer is reported (node-local, as above)
HOST_WATCHED = "_host_watched"
#: times the request waited for its host to stop pushing back, and to lift a ban
HOST_WAITS = "host_waits"
BAN_RETRIES = "ban_retries"
#: only mark the request's URL seen for its crawl, never fetch it: a page's
#: rel="canonical" (spidermiddlewares/canonical.py; node-local, never stored)
SEEN_ONLY = "_seen_only"
#: times the request waited for its host's robots.txt to become readable
ROBOTS_WAITS = "robots_waits"

#: why a 402 Payment Required was not paid for (extensions/paycrawl/), for its
#: dead letter (node-local: never queued)
PAYMENT_REFUSED = "_payment_refused"

#: the crawl the request belongs to (a crawl id; absent: the crawl without one).
#: Requests a response produces inherit it (spidermiddlewares/crawlid.py)
CRAWL_ID = "crawl_id"

#: fetch the request with a browser: it queues in its host's render lane and only
#: a render node leases it (extensions/render; a start entry may set it)
RENDER = "render"
#: what the browser does on the page before its HTML is taken: a JSON list of
#: page actions (extensions/render/actions.py; a start entry may set it)
RENDER_ACTIONS = "render_actions"
#: RENDER_AUTO's plain fetch that checks whether the page needs a browser:
#: "probe" (nothing learned for its URL pattern) or "recheck" (learned, and
#: checked again in case the site changed)
RENDER_CHECK = "render_check"
RENDER_CHECKS = ("probe", "recheck")

#: the largest request priority taken (either sign); the queue orders by at
#: most +-2**20 of it (scripts/_entries.lua), with the discovery order below it
MAX_PRIORITY = 10**9


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _list_of_ints(value: Any) -> bool:
    return isinstance(value, list) and all(_integer(v) for v in value)


def _list_of_text(value: Any) -> bool:
    return isinstance(value, list) and all(_text(v) for v in value)


def _crawl_id(value: Any) -> bool:
    return crawl_id_problem(value) is None


def _slot(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value)


# Control keys and the type each must have: Scrapy's own request.meta keys that
# change how a request is fetched, and the stack's bookkeeping.
CONTROL_KEYS: dict[str, Any] = {
    # proxies and download slots (Scrapy, scrapy-rotating-proxies)
    "proxy": _text,
    "_rotating_proxy": _flag,
    "_auth_proxy": _text,
    "_ban": _flag,
    "download_slot": _text,
    "bindaddress": _text,
    # robots.txt, sizes, time limits, TLS and data loss
    "dont_obey_robotstxt": _flag,
    "download_maxsize": _integer,
    "download_warnsize": _integer,
    "download_timeout": _number,
    "download_latency": _number,
    "download_fail_on_dataloss": _flag,
    "max_retry_times": _integer,
    "dont_retry": _flag,
    "dont_redirect": _flag,
    "redirect_times": _integer,
    "redirect_ttl": _integer,
    "redirect_urls": _list_of_text,
    "redirect_reasons": list,
    "handle_httpstatus_all": _flag,
    "handle_httpstatus_list": _list_of_ints,
    "dont_merge_cookies": _flag,
    "dont_cache": _flag,
    "ftp_user": _text,
    "ftp_password": _text,
    "depth": _integer,
    # the stack's own
    DELAY_UNTIL: _number,
    FIRST_FAILURE: _number,
    DEAD_LETTERED: _flag,
    START_ENTRY: _text,
    CRAWL_ID: _crawl_id,
    RECRAWL: dict,
    RECRAWL_AFTER: _number,
    ROBOTS_WAITS: _integer,
    SEND_SLOT: _slot,
    HOST_WATCHED: _flag,
    SEEN_ONLY: _flag,
    HOST_WAITS: _integer,
    BAN_RETRIES: _integer,
    RENDER_CHECK: lambda value: value in RENDER_CHECKS,
    "trap_chain": _integer,  # extensions.frontier.traps.CHAIN
    "retry_times": _integer,
    "retry_backoff_base": _number,
    "retry_backoff_max": _number,
}


@functools.cache
def control_keys() -> dict[str, Any]:
    """CONTROL_KEYS, and those the declared capabilities steer requests with
    (``extensions/capability.py``)."""
    return {**CONTROL_KEYS, **capability.control_meta()}


def control_meta_problem(meta: dict[str, Any]) -> str | None:
    """Why a queue entry's meta cannot be trusted to steer a node, or None
    (its page actions are checked by extensions.render.actions)."""
    if RENDER in meta and not _flag(meta[RENDER]):
        return f"meta['render'] holds {meta[RENDER]!r:.80}, not true or false"
    control = control_keys()
    for key in meta.keys() & control.keys():  # meta is small: cheap on the hot path
        check = control[key]
        value = meta[key]
        ok = isinstance(value, check) if isinstance(check, type) else check(value)
        if not ok:
            return f"meta[{key!r}] holds {value!r:.80}, not a value the crawler can use"
    return None


def priority_problem(priority: Any) -> str | None:
    if not _integer(priority):
        return f"priority {priority!r:.80} is not an integer"
    if abs(priority) > MAX_PRIORITY:
        return f"priority {priority} is out of range (at most ±{MAX_PRIORITY:,})"
    return None


def entry_meta(meta: dict[str, Any], allowed: frozenset[str] | None) -> tuple[dict, list[str]]:
    """The keys of a start-URL entry's meta a node takes, and those it drops.

    ``allowed`` is ``START_URL_META_KEYS``: None (``"*"``) takes every key that
    is not a control key; a set takes only the keys it names. Control keys are
    never taken.
    """
    kept, dropped = {}, []
    for key, value in meta.items():
        if key in control_keys() or (allowed is not None and key not in allowed):
            dropped.append(key)
        else:
            kept[key] = value
    return kept, dropped
