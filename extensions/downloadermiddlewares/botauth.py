"""Signs every request (``BOT_AUTH_KEY``, ``BOT_AUTH_KEYS``): Web Bot Auth's three headers
(``extensions/botauth.py``), set after every header that could change them,
again for each retry and redirect, through proxies alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extensions.botauth import (
    FORMATS,
    BotSigner,
    SigningKey,
    agent_problem,
    expiry_problem,
    key_paths,
    signer_from_settings,
)
from extensions.installed import require_addon, switched_off
from extensions.settingchecks import choice, number

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


def _keys_problem(settings: Any, name: str) -> str | None:
    """Each key this setting names can be read; the last setting that names a
    key also says whether, all keys together, one is valid for long enough."""
    named = key_paths(settings)
    keys = []
    for setting, path in named:
        try:
            keys.append(SigningKey.read(path))
        except ValueError as exc:
            if setting == name:
                return f"{path!r} {exc}" if name == "BOT_AUTH_KEYS" else str(exc)
            return None  # the other setting says it
    if named and named[-1][0] == name:
        return expiry_problem(keys)
    return None


def _agent_problem(settings: Any, name: str) -> str | None:
    agent = settings.get(name) or ""
    if not agent:
        return "must be set with BOT_AUTH_KEY" if key_paths(settings) else None
    return agent_problem(agent)


#: request header fields a signature covers when a request carries them: the price
#: a pay-per-crawl request agrees to (extensions/paycrawl/), as the protocol asks
COVERED_FIELDS = ("crawler-exact-price", "crawler-max-price")

SETTING_CHECKS = {
    "BOT_AUTH_KEY": _keys_problem,
    "BOT_AUTH_KEYS": _keys_problem,
    "BOT_AUTH_FORMAT": choice(*FORMATS),
    "BOT_AUTH_SIGNATURE_AGENT": _agent_problem,
    "BOT_AUTH_VALIDITY": number(float, 0, 86400, above=True),
}


class BotAuthMiddleware:
    def __init__(self, signer: BotSigner, stats: Any):
        self.signer = signer
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BotAuthMiddleware:
        require_addon(crawler.settings, cls.__name__)
        signer = signer_from_settings(crawler.settings)
        if signer is None:
            raise switched_off(cls, "BOT_AUTH_KEY and BOT_AUTH_KEYS are not set")
        return cls(signer, crawler.stats)

    def process_request(self, request: Request, spider: Any = None) -> None:
        covered = {name: (request.headers.get(name) or b"").decode("latin-1")
                   for name in COVERED_FIELDS if name in request.headers}  # fmt: skip
        for name, value in self.signer.headers(request.url, fields=covered).items():
            request.headers[name] = value
        self.stats.inc_value("botauth/signed")
