"""What a ban looks like: a status in ``BAN_STATUSES``, or a page that is a
challenge rather than content.

The built-in markers are those of the common challenge and captcha pages
(Cloudflare, DataDome, PerimeterX, Imperva, AWS WAF, and a small page asking
for a captcha); ``BAN_MARKERS`` adds more, and a spider's
``response_is_ban(request, response)`` method has the last word. A ban page
never reaches a callback and is never stored: its request waits and is tried
again, with a new identity (``extensions/downloadermiddlewares/pushback.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

# Text of challenge pages, matched in the first bytes of a body (lower case).
CHALLENGE_MARKERS = (
    b"/cdn-cgi/challenge-platform/",  # Cloudflare's managed challenge
    b"cf-chl-",
    b"<title>just a moment...</title>",
    b"attention required! | cloudflare",
    b"captcha-delivery.com",  # DataDome
    b"px-captcha",  # PerimeterX / HUMAN
    b"_incapsula_resource",  # Imperva
    b"awswafintegration",  # AWS WAF's challenge
)
# A page this small that talks of a captcha is one: real pages that embed a
# captcha widget (a contact form) are larger than this.
SMALL_PAGE = 20_000
CAPTCHA_WORDS = (b"captcha", b"are you a robot", b"verify you are human")
SCANNED = 100_000  # bytes of a body looked at


class BanDetector:
    def __init__(self, statuses: set[int], markers: list[bytes], spider: Any = None):
        self.statuses = statuses
        self.markers = [*CHALLENGE_MARKERS, *markers]
        override = getattr(spider, "response_is_ban", None)
        self.spider_says = override if callable(override) else None

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider: Any = None) -> BanDetector:
        statuses = {int(s) for s in settings.getlist("BAN_STATUSES")}
        markers = [str(m).lower().encode() for m in settings.getlist("BAN_MARKERS")]
        return cls(statuses, markers, spider)

    def is_ban(self, request: Request, response: Response) -> bool:
        if self.spider_says is not None:
            verdict = self.spider_says(request, response)
            if verdict is not None:  # None: the spider leaves it to the rules below
                return bool(verdict)
        if response.status in self.statuses:
            return True
        if response.status >= 300 and response.status not in (403, 429, 503):
            return False  # redirects and plain errors are not challenge pages
        body = response.body[:SCANNED].lower()
        if any(marker in body for marker in self.markers):
            return True
        return len(response.body) < SMALL_PAGE and any(word in body for word in CAPTCHA_WORDS)
