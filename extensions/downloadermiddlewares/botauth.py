"""Signs every request (``BOT_AUTH_KEY``): Web Bot Auth's three headers
(``extensions/botauth.py``), set after every header that could change them,
again for each retry and redirect, through proxies alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extensions.botauth import (
    BotSigner,
    agent_problem,
    expiry_problem,
    load_private_key,
    signer_from_settings,
)
from extensions.installed import require_addon, switched_off
from extensions.settingchecks import number

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


def _key_problem(settings: Any, name: str) -> str | None:
    path = settings.get(name) or ""
    if not path:
        return None
    try:
        key = load_private_key(path)
    except ValueError as exc:
        return str(exc)
    return expiry_problem(path, key)


def _agent_problem(settings: Any, name: str) -> str | None:
    agent = settings.get(name) or ""
    if not agent:
        return "must be set with BOT_AUTH_KEY" if settings.get("BOT_AUTH_KEY") else None
    return agent_problem(agent)


SETTING_CHECKS = {
    "BOT_AUTH_KEY": _key_problem,
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
            raise switched_off(cls, "BOT_AUTH_KEY is not set")
        return cls(signer, crawler.stats)

    def process_request(self, request: Request, spider: Any = None) -> None:
        for name, value in self.signer.headers(request.url).items():
            request.headers[name] = value
        self.stats.inc_value("botauth/signed")
