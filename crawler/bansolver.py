"""The worked example of a ``BAN_HANDLER``: answers the demo site's captcha.

A host that bans the crawl serves a challenge page instead of content
(``demosite/pushback.py``); the stack never hands it to a callback. With
``BAN_HANDLER = "crawler.bansolver.DemoChallengeSolver"`` the page comes here
first: the requests returned (the answer to its form) are sent at once, and
the banned request is tried again right after. A real solver would call a
solving service here; a spider can instead define ``handle_ban(request,
response)`` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import FormRequest

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response


class DemoChallengeSolver:
    def handle_ban(self, request: Request, response: Response) -> list[Request] | None:
        if not hasattr(response, "css"):
            return None  # not a page (a 403 without a body, say): nothing to answer
        form = response.css("form[action='/__challenge']")
        numbers = [response.css(f"span.{name}::text").get() for name in ("a", "b")]
        if not form or not all(n and n.strip().isdigit() for n in numbers):
            return None  # a ban this solver cannot answer: the host backs off
        answer = sum(int(n) for n in numbers if n)
        return [
            FormRequest(
                response.urljoin("/__challenge"),
                formdata={"answer": str(answer)},
                dont_filter=True,
            )
        ]
