"""``make bench`` section 25: what being a crawler sites can trust costs.

* CPU per request of signing it (Web Bot Auth: ``extensions/botauth.py``), the
  signature base built and an Ed25519 signature made, in each form (the working
  group's, with its nonce; the legacy one).
* CPU per page of the usage check: the URL's robots.txt rules by longest path,
  the page's ``Content-Signal`` and ``Content-Usage`` headers (RFC 9651), and
  whether they refuse the crawl's purpose (``extensions/purpose/``).
* CPU per page of reading what it says of itself (meta robots, X-Robots-Tag:
  ``spidermiddlewares/robotsmeta.py``, on by default) on Python's HTML
  documentation, real pages nobody here wrote.
"""

from __future__ import annotations

import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scrapy.http import HtmlResponse

from extensions.botauth import FORMATS, BotSigner
from extensions.purpose.policy import refusal
from extensions.spidermiddlewares.robotsmeta import header_directives, meta_directives
from extensions.usage import Problems, header_usage, refusal_wins, robots_usage
from servers.nginx import PYTHON_DOCS

AGENT = "https://bots.example/.well-known/http-message-signatures-directory"


#: the AI-preferences attachment draft's way of writing rules, as a site might
ROBOTS = b"""User-agent: *
Allow: /
Content-Usage: train-ai=n
Content-Usage: /blog/ train-ai=y, search=y
Content-Usage: /blog/private/ bots=n
Content-Usage: /docs/*.pdf$ train-genai=n
Content-Signal: search=yes, ai-input=no
"""


def signing_cost(form: str, count: int = 20_000) -> float:
    """Microseconds of CPU a request's signature takes."""
    signer = BotSigner(Ed25519PrivateKey.generate(), AGENT, 60, form)
    urls = [f"https://host{n % 500}.example:8443/page/{n}" for n in range(count)]
    started = time.process_time()
    for url in urls:
        signer.headers(url)
    return (time.process_time() - started) / count * 1e6


def robots_meta_cost() -> dict[str, float]:
    pages = sorted(PYTHON_DOCS.rglob("*.html"))[:1500]
    responses = [HtmlResponse(f"https://docs.example/{p.name}", body=p.read_bytes()) for p in pages]
    if not responses:
        return {}
    started = time.process_time()
    for response in responses:
        header_directives(response.headers.getlist("X-Robots-Tag"), "crawler")
        meta_directives(response, "crawler")
    spent = time.process_time() - started
    return {"pages": len(responses), "us": spent / len(responses) * 1e6}


def usage_check_cost(count: int = 20_000) -> float:
    """Microseconds of CPU a page's usage check takes, as the spider middleware
    makes it: the robots.txt rule of its path, its headers, the purpose."""
    rules = robots_usage(ROBOTS, "crawler")
    paths = ["/", "/blog/2026/post", "/blog/private/x", "/docs/a.pdf", "/shop/item?id=3"]
    headers = [b'train-ai=n;reason="licensed", search=y', b"bots=y"]
    started = time.process_time()
    for n in range(count):
        problems = Problems()
        usage = refusal_wins(
            rules.for_path(paths[n % len(paths)]),
            header_usage([]),
            header_usage([headers[n % 2]], True, problems),
        )
        refusal(usage, "ai-train")
    return (time.process_time() - started) / count * 1e6


def measure() -> dict:
    return {
        "signing_us": {form: signing_cost(form) for form in FORMATS},
        "usage_us": usage_check_cost(),
        "robots_meta": robots_meta_cost(),
    }


def report(result: dict) -> None:
    for form, us in result["signing_us"].items():
        print(f"   signing a request (Web Bot Auth, Ed25519, {form} form): {us:.0f} µs of CPU")
    print(f"   the usage check of a page (robots.txt rule, headers, purpose): "
          f"{result['usage_us']:.1f} µs of CPU")  # fmt: skip
    meta = result["robots_meta"]
    if meta:
        print(f"   reading a page's robots directives: {meta['us']:.1f} µs of CPU per page "
              f"({meta['pages']} pages of Python's documentation)")  # fmt: skip


if __name__ == "__main__":  # this section alone: python -m tools.trust_bench
    report(measure())
